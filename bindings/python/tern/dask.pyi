# Type stubs of tern.dask.
import os
from typing import Any

import numpy as np

from . import Session

loads: int

def session(model_path: str | os.PathLike[str], **options: Any) -> Session: ...
def process_info() -> dict[str, int]: ...
def clear() -> None: ...
def run_block(block: np.ndarray, model_path: str | os.PathLike[str], input_name: str | None = ...,
              output: str | None = ..., **options: Any) -> np.ndarray: ...
def map_blocks(model_path: str | os.PathLike[str], x: Any, input_name: str | None = ...,
               output: str | None = ..., out_shape: tuple[int, ...] | None = ...,
               dtype: Any = ..., **options: Any) -> Any: ...
def map_bag(model_path: str | os.PathLike[str], bag: Any, input_name: str | None = ...,
            outputs: list[str] | None = ..., **options: Any) -> Any: ...

#!/usr/bin/python3
"""Writes the fuzz targets' seed models that have subgraphs and sequences (python3-onnx):

  tests/fuzz/make_seeds.py BUILD_DIR

corpus/onnx_importer/control_flow.bin: an If inside a Loop body reading a value of the main graph
(captured two levels up), a Scan with a reversed input; corpus/onnx_importer/sequences.bin:
SplitToSequence, SequenceInsert, ConcatFromSequence, an Optional of the sequence. The .tern seeds
(corpus/tern_loader/control_flow.tern, sequences.tern) are those models converted with BUILD_DIR's
`tern convert`. The bindings' tests run sequences.tern.
"""
import os
import subprocess
import sys

import numpy as np
import onnx
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper as nh

HERE = os.path.dirname(os.path.abspath(__file__))


def control_flow():
    then_b = h.make_graph([h.make_node("Add", ["acc", "bias"], ["up"])], "then", [],
                          [h.make_tensor_value_info("up", T.FLOAT, [2])])
    else_b = h.make_graph([h.make_node("Sub", ["acc", "bias"], ["down"])], "else", [],
                          [h.make_tensor_value_info("down", T.FLOAT, [2])])
    body = h.make_graph(
        [h.make_node("Identity", ["cond"], ["cond_out"]),
         h.make_node("If", ["flag"], ["next"], then_branch=then_b, else_branch=else_b)],
        "body",
        [h.make_tensor_value_info("i", T.INT64, []), h.make_tensor_value_info("cond", T.BOOL, []),
         h.make_tensor_value_info("acc", T.FLOAT, [2])],
        [h.make_tensor_value_info("cond_out", T.BOOL, []),
         h.make_tensor_value_info("next", T.FLOAT, [2])])
    scan_body = h.make_graph(
        [h.make_node("Add", ["s", "x"], ["s_out"]), h.make_node("Identity", ["s_out"], ["y"])],
        "scan_body",
        [h.make_tensor_value_info("s", T.FLOAT, [2]), h.make_tensor_value_info("x", T.FLOAT, [2])],
        [h.make_tensor_value_info("s_out", T.FLOAT, [2]),
         h.make_tensor_value_info("y", T.FLOAT, [2])])
    g = h.make_graph(
        [h.make_node("Loop", ["M", "", "a0"], ["looped"], body=body),
         h.make_node("Scan", ["looped", "xs"], ["s_final", "ys"], body=scan_body,
                     num_scan_inputs=1, scan_input_directions=[1])],
        "control_flow",
        [h.make_tensor_value_info("bias", T.FLOAT, [2]), h.make_tensor_value_info("flag", T.BOOL, []),
         h.make_tensor_value_info("a0", T.FLOAT, [2]),
         h.make_tensor_value_info("xs", T.FLOAT, [3, 2])],
        [h.make_tensor_value_info("s_final", T.FLOAT, [2]),
         h.make_tensor_value_info("ys", T.FLOAT, [3, 2])],
        [nh.from_array(np.array(3, dtype=np.int64), "M")])
    return h.make_model(g, opset_imports=[h.make_opsetid("", 17)])


def sequences():
    seq_t = h.make_tensor_sequence_value_info("seq", T.FLOAT, [2])
    g = h.make_graph(
        [h.make_node("SplitToSequence", ["x"], ["parts"], axis=0, keepdims=0),
         h.make_node("ConcatFromSequence", ["seq"], ["joined"], axis=0),
         h.make_node("SequenceInsert", ["seq", "extra"], ["longer"]),
         h.make_node("Identity", ["seq"], ["same"]),
         h.make_node("Optional", ["seq"], ["wrapped"])],
        "sequences",
        [seq_t, h.make_tensor_value_info("x", T.FLOAT, [3, 2]),
         h.make_tensor_value_info("extra", T.FLOAT, [2])],
        [h.make_tensor_value_info("joined", T.FLOAT, [None]),
         h.make_tensor_sequence_value_info("same", T.FLOAT, [2]),
         h.make_tensor_sequence_value_info("longer", T.FLOAT, [2]),
         h.make_tensor_sequence_value_info("parts", T.FLOAT, [2]),
         h.make_value_info("wrapped", h.make_optional_type_proto(
             h.make_sequence_type_proto(h.make_tensor_type_proto(T.FLOAT, [2]))))])
    return h.make_model(g, opset_imports=[h.make_opsetid("", 18)])


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    tern = os.path.join(sys.argv[1], "tern")
    for name, model in (("control_flow", control_flow()), ("sequences", sequences())):
        onnx.checker.check_model(model)
        src = os.path.join(HERE, "corpus", "onnx_importer", name + ".bin")
        with open(src, "wb") as f:
            f.write(model.SerializeToString())
        dst = os.path.join(HERE, "corpus", "tern_loader", name + ".tern")
        subprocess.run([tern, "convert", src, dst], check=True, stdout=subprocess.DEVNULL)
        print(src)
        print(dst)


if __name__ == "__main__":
    main()

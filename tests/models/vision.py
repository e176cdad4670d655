"""Vision models for the corpus: torchvision classifiers, segmenters, video networks and a
detection backbone (ResNet + FPN), random weights, small inputs.

Random weights make degenerate networks unless the normalisations are set: every normalisation's
affine parameters are drawn at random (scale in [0.5, 1.5], shift ~ N(0, 0.2)), then BatchNorm's
running statistics are taken from one training-mode pass over a batch of random inputs (each layer
then sees inputs of a realistic scale, and the statistics differ layer by layer and channel by
channel as trained ones do). The reference input is another draw.

`export(name, out_dir)` writes `<name>.onnx` (opset 17, fixed input shape) and returns its path;
CASES lists the names with their input shapes. The input the reference is made with is written
beside the model (`<name>.input.npy`), and PyTorch's outputs for it (`<name>.torch.<output>.npy`).
"""
import os

import numpy as np
import torch
import torchvision
from torch import nn
from torchvision.models import segmentation, video
from torchvision.models.detection.backbone_utils import resnet_fpn_backbone


class _First(nn.Module):
    """A model's main output when it returns a dict (segmentation: 'out') or several."""

    def __init__(self, inner, key):
        super().__init__()
        self.inner, self.key = inner, key

    def forward(self, x):
        return self.inner(x)[self.key]


class _Features(nn.Module):
    """Every feature map of a backbone that returns an OrderedDict, as separate outputs."""

    def __init__(self, inner):
        super().__init__()
        self.inner = inner

    def forward(self, x):
        return tuple(self.inner(x).values())


def _tv(fn, **kw):
    return lambda: getattr(torchvision.models, fn)(weights=None, **kw)


def _swin_small():
    from torchvision.models.swin_transformer import SwinTransformer
    return SwinTransformer(patch_size=[4, 4], embed_dim=48, depths=[2, 2, 2, 2],
                           num_heads=[3, 6, 12, 24], window_size=[7, 7],
                           stochastic_depth_prob=0.0, num_classes=100)


def _vit_tiny():
    from torchvision.models.vision_transformer import VisionTransformer
    m = VisionTransformer(image_size=128, patch_size=16, num_layers=6, num_heads=3,
                          hidden_dim=192, mlp_dim=768, num_classes=100)
    # torchvision starts the head at zero (every output 0 whatever the encoder computes): random
    # instead, so the outputs check the encoder.
    nn.init.normal_(m.heads.head.weight, std=0.05)
    return m


def _maxvit_small():
    from torchvision.models.maxvit import MaxVit
    return MaxVit(input_size=(128, 128), stem_channels=32, partition_size=4,
                  block_channels=[32, 64, 128, 256], block_layers=[1, 1, 1, 1], head_dim=16,
                  stochastic_depth_prob=0.0, num_classes=100)


# name -> (builder, input shape, what it exercises)
CASES = {
    "resnet50": (_tv("resnet50"), (1, 3, 128, 128), "bottleneck residual blocks"),
    "resnext50": (_tv("resnext50_32x4d"), (1, 3, 128, 128), "grouped 3x3 (32 groups)"),
    "wide_resnet50": (_tv("wide_resnet50_2"), (1, 3, 96, 96), "wide bottlenecks"),
    "mobilenet_v3_small": (_tv("mobilenet_v3_small"), (1, 3, 160, 160),
                           "depthwise, hard-swish, squeeze-excite"),
    "mobilenet_v3_large": (_tv("mobilenet_v3_large"), (1, 3, 160, 160),
                           "depthwise 5x5, hard-swish, squeeze-excite"),
    "efficientnet_b0": (_tv("efficientnet_b0"), (1, 3, 160, 160), "MBConv, SiLU, squeeze-excite"),
    "efficientnet_v2_s": (_tv("efficientnet_v2_s"), (1, 3, 128, 128), "fused MBConv"),
    "regnet_y_400mf": (_tv("regnet_y_400mf"), (1, 3, 160, 160), "grouped 3x3 (8 per group)"),
    "regnet_x_400mf": (_tv("regnet_x_400mf"), (1, 3, 160, 160), "grouped 3x3 (16 per group)"),
    "shufflenet_v2": (_tv("shufflenet_v2_x1_0"), (1, 3, 160, 160), "channel shuffle"),
    "squeezenet": (_tv("squeezenet1_1"), (1, 3, 160, 160), "fire modules (Concat)"),
    "densenet121": (_tv("densenet121"), (1, 3, 128, 128), "BatchNorm after Concat"),
    "googlenet": (_tv("googlenet", aux_logits=False, init_weights=True), (1, 3, 160, 160),
                  "inception blocks, 3x3 max pooling with ceil mode"),
    "inception_v3": (_tv("inception_v3", aux_logits=False, init_weights=True),
                     (1, 3, 160, 160), "1x7/7x1 convolutions, average pooling"),
    "mnasnet": (_tv("mnasnet1_0"), (1, 3, 160, 160), "depthwise 3x3/5x5"),
    "convnext_tiny": (_tv("convnext_tiny"), (1, 3, 128, 128), "depthwise 7x7, LayerNorm, GELU"),
    "vit_tiny": (_vit_tiny, (1, 3, 128, 128), "patch embedding, encoder blocks"),
    "swin_small": (_swin_small, (1, 3, 224, 224), "window attention, roll, patch merging"),
    "maxvit_small": (_maxvit_small, (1, 3, 128, 128), "block and grid attention, MBConv"),
    "deeplabv3": (lambda: _First(segmentation.deeplabv3_mobilenet_v3_large(
        weights=None, weights_backbone=None, num_classes=21), "out"), (1, 3, 224, 224),
        "ASPP: dilations 12/24/36 on a 14x14 map, bilinear upsampling"),
    "fcn_resnet50": (lambda: _First(segmentation.fcn_resnet50(
        weights=None, weights_backbone=None, num_classes=21), "out"), (1, 3, 96, 96),
        "dilated ResNet (output stride 8)"),
    "lraspp": (lambda: _First(segmentation.lraspp_mobilenet_v3_large(
        weights=None, weights_backbone=None, num_classes=21), "out"), (1, 3, 224, 224),
        "pooling branch, sigmoid gate, bilinear upsampling"),
    "r3d_18": (lambda: video.r3d_18(weights=None), (1, 3, 4, 64, 64), "3-D convolutions"),
    "mc3_18": (lambda: video.mc3_18(weights=None), (1, 3, 4, 64, 64), "mixed 3-D/2-D convolutions"),
    "r2plus1d_18": (lambda: video.r2plus1d_18(weights=None), (1, 3, 4, 64, 64),
                    "(2+1)-D factorised convolutions"),
    "resnet18_fpn": (lambda: _Features(resnet_fpn_backbone(
        backbone_name="resnet18", weights=None, trainable_layers=5)), (1, 3, 160, 160),
        "detection backbone: FPN, nearest upsampling, five outputs"),
}


# float16 versions (half.py): name -> the float32 case each is made from.
HALF = {"resnet50_fp16": "resnet50", "vit_tiny_fp16": "vit_tiny"}
for _half, _base in HALF.items():
    CASES[_half] = (CASES[_base][0], CASES[_base][1],
                    "float16 weights and activations, float32 inputs and outputs")


# bfloat16 versions: PyTorch's own export of `model.bfloat16()` (PyTorch runs bfloat16 on the CPU),
# given float32 inputs and outputs (half.with_float32_ends). ONNX Runtime has no bfloat16 Conv or
# MatMul: their reference is PyTorch's bfloat16 run (`<name>.torch.output.npy`), and its distance
# from PyTorch's float32 run (`<name>.torch_f32.output.npy`) is the noise floor.
BF16 = {"resnet50_bf16": "resnet50", "vit_tiny_bf16": "vit_tiny"}
for _bf16, _base in BF16.items():
    CASES[_bf16] = (CASES[_base][0], CASES[_base][1],
                    "bfloat16 weights and activations (model.bfloat16()), float32 ends")


def randomise_norms(model, batch, seed):
    """Random affine parameters for every normalisation, then BatchNorm statistics from one
    training-mode pass over `batch` (a tuple of inputs; none is needed without BatchNorm)."""
    g = torch.Generator().manual_seed(seed + 1000)
    norms = (nn.BatchNorm1d, nn.BatchNorm2d, nn.BatchNorm3d, nn.LayerNorm, nn.GroupNorm,
             nn.InstanceNorm1d, nn.InstanceNorm2d, nn.InstanceNorm3d)
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, norms) and getattr(m, "weight", None) is not None:
                m.weight.copy_(torch.rand(m.weight.shape, generator=g) + 0.5)
                m.bias.copy_(torch.randn(m.bias.shape, generator=g) * 0.2)
            if isinstance(m, (nn.BatchNorm1d, nn.BatchNorm2d, nn.BatchNorm3d)):
                m.momentum = None  # a cumulative average: the pass below sets the statistics
                m.reset_running_stats()
    if any(isinstance(m, nn.modules.batchnorm._BatchNorm) for m in model.modules()):
        model.train()
        with torch.no_grad():
            model(*batch)
    model.eval()


def export(name, out_dir, seed=0):
    builder, shape, _ = CASES[name]
    torch.manual_seed(seed)
    model = builder()
    g = torch.Generator().manual_seed(seed + 2000)
    randomise_norms(model, (torch.randn((4,) + tuple(shape[1:]), generator=g),), seed)
    x = torch.randn(shape, generator=torch.Generator().manual_seed(seed))
    with torch.no_grad():
        out = model(x)
    outs = out if isinstance(out, (tuple, list)) else (out,)
    names = ["output"] if len(outs) == 1 else [f"output_{i}" for i in range(len(outs))]
    np.save(os.path.join(out_dir, f"{name}.input.npy"), x.numpy())  # the reference input
    if name in BF16:
        for n, o in zip(names, outs):
            np.save(os.path.join(out_dir, f"{name}.torch_f32.{n}.npy"), o.numpy())
        model, x = model.bfloat16(), x.bfloat16()
        with torch.no_grad():
            out = model(x)
        outs = out if isinstance(out, (tuple, list)) else (out,)
    for n, o in zip(names, outs):  # PyTorch's own outputs: check_corpus.py's noise floor
        np.save(os.path.join(out_dir, f"{name}.torch.{n}.npy"), o.float().numpy())
    path = os.path.join(out_dir, name + ".onnx")
    torch.onnx.export(model, (x,), path, opset_version=17, input_names=["input"],
                      output_names=names, do_constant_folding=True)
    if name in BF16:
        import onnx
        from half import with_float32_ends
        onnx.save(with_float32_ends(onnx.load(path), onnx.TensorProto.BFLOAT16), path)
    if name in HALF:
        import onnx
        from half import to_half
        onnx.save(to_half(onnx.load(path)), path)
    return [path]

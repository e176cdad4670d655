"""Detection models for the corpus: torchvision's SSDlite320 and Faster R-CNN, both on MobileNetV3
backbones, random weights, eval mode, one 320x320 image. Their graphs hold what detectors need:
NonMaxSuppression, TopK, NonZero, GatherND, RoiAlign, and If/Loop around them.

Random weights alone make degenerate detectors: with BatchNorm's initial statistics the backbone's
features collapse to the same value everywhere, every region then gets the same score, and which
equal-scored boxes come out is decided by float noise. So the backbone's BatchNorm statistics are
taken from a synthetic scene (a textured background and coloured rectangles), the class predictors get wider
random weights, Faster R-CNN keeps every box above score 0, and the reference input is that scene.
Each export function writes an ONNX file (opset 17) and an input file `<name>.images.npy`, and
returns the model's path.
"""
import os

import numpy as np
import torch
import torchvision


def scene(seed=1):
    """A 3x320x320 image in [0, 1]: a textured background (so that no two places look alike) and
    twelve coloured rectangles."""
    g = torch.Generator().manual_seed(seed)
    img = torch.rand(3, 320, 320, generator=g) * 0.3 + torch.linspace(0, 0.5, 320)[None, None, :]
    for _ in range(12):
        c = torch.rand(3, generator=g)
        y0, x0 = torch.randint(0, 280, (2,), generator=g).tolist()
        h, w = torch.randint(10, 80, (2,), generator=g).tolist()
        img[:, y0:y0 + h, x0:x0 + w] = c[:, None, None]
    return img


def _adapt(model, img, seed):
    """Convolutions of the backbone re-drawn at unit gain (torchvision's detection init shrinks
    them until the features vanish), then BatchNorm statistics from `img` and three other scenes
    (a batch: the last feature maps are 1x1)."""
    g = torch.Generator().manual_seed(seed + 100)
    with torch.no_grad():
        for mod in model.backbone.modules():
            if isinstance(mod, torch.nn.Conv2d):
                fan_in = mod.weight[0].numel()
                mod.weight.copy_(torch.randn(mod.weight.shape, generator=g) / fan_in ** 0.5)
    model.backbone.train()
    with torch.no_grad():
        batch = model.transform([img] + [scene(seed + 10 + k) for k in range(3)])[0].tensors
        for _ in range(20):
            model.backbone(batch)
    model.eval()


def _spread(module, seed, std):
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in module.parameters():
            p.copy_(torch.randn(p.shape, generator=g) * std)


def _export(model, name, out_dir, img):
    path = os.path.join(out_dir, name + ".onnx")
    with torch.no_grad():
        out = model([img])[0]
    if out["boxes"].shape[0] == 0:
        raise RuntimeError(f"{name}: no detections with these weights")
    torch.onnx.export(model, ([img],), path, opset_version=17, input_names=["images"],
                      output_names=list(out.keys()))
    np.save(os.path.join(out_dir, name + ".images.npy"), img.numpy())
    return path


def export_ssdlite(out_dir, seed=0):
    """ssdlite.onnx: images float32 [3, 320, 320] -> boxes [n, 4], scores [n], labels int64 [n]."""
    torch.manual_seed(seed)
    m = torchvision.models.detection.ssdlite320_mobilenet_v3_large(
        weights=None, weights_backbone=None, num_classes=91).eval()
    img = scene()
    _adapt(m, img, seed)
    _spread(m.head.classification_head, seed + 1, 0.3)
    return [_export(m, "ssdlite", out_dir, img)]


def export_faster_rcnn(out_dir, seed=0):
    """faster_rcnn.onnx: images float32 [3, 320, 320] -> boxes [n, 4], labels int64 [n],
    scores [n]."""
    torch.manual_seed(seed)
    m = torchvision.models.detection.fasterrcnn_mobilenet_v3_large_320_fpn(
        weights=None, weights_backbone=None, num_classes=91, box_score_thresh=0.0).eval()
    img = scene()
    _adapt(m, img, seed)
    _spread(m.roi_heads.box_predictor, seed + 1, 0.3)
    return [_export(m, "faster_rcnn", out_dir, img)]

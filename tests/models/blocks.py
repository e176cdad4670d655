"""torch.nn building blocks for the corpus: Transformer encoder and decoder, MultiheadAttention with
masks, Conv1d audio stacks (strided and dilated), ConvTranspose decoders, GroupNorm/InstanceNorm
U-Net, PixelShuffle super-resolution, and a zoo of convolution shapes that fall off common fast
paths (grouped of every width, depthwise with a multiplier, dilations whose taps land in padding,
3-D and 1-D convolution and pooling). Random weights (seeded), normalisations randomised as in
vision.py.

`export(name, out_dir)` writes `<name>.onnx` (opset 17, fixed shapes) and returns its path; the
inputs the reference is made with are written beside it (`<name>.<input>.npy`: random draws, and
fixed masks), and PyTorch's outputs for them (`<name>.torch.<output>.npy`).
"""
import os

import numpy as np
import torch
from torch import nn

from vision import randomise_norms


class TransformerEncoder(nn.Module):
    """Post-norm encoder (BERT-like, 4 layers) with a key padding mask."""

    def __init__(self):
        super().__init__()
        layer = nn.TransformerEncoderLayer(256, 8, 1024, dropout=0.0, batch_first=True)
        self.enc = nn.TransformerEncoder(layer, 4, enable_nested_tensor=False)

    def forward(self, x, pad):
        return self.enc(x, src_key_padding_mask=pad)


class TransformerDecoder(nn.Module):
    """Pre-norm decoder (2 layers) with a causal mask over the target and cross-attention."""

    def __init__(self):
        super().__init__()
        layer = nn.TransformerDecoderLayer(256, 8, 1024, dropout=0.0, batch_first=True,
                                           norm_first=True, activation="gelu")
        self.dec = nn.TransformerDecoder(layer, 2)
        self.register_buffer("causal", nn.Transformer.generate_square_subsequent_mask(32))

    def forward(self, tgt, memory):
        return self.dec(tgt, memory, tgt_mask=self.causal)


class MhaMasks(nn.Module):
    """Cross-attention with a float attention mask and a boolean key padding mask."""

    def __init__(self):
        super().__init__()
        self.mha = nn.MultiheadAttention(256, 8, batch_first=True)
        self.out = nn.Linear(256, 256)

    def forward(self, q, kv, attn_mask, pad):
        y, w = self.mha(q, kv, kv, attn_mask=attn_mask, key_padding_mask=pad)
        return self.out(y), w


class AudioConv(nn.Module):
    """A wav2vec2-like feature encoder: strided Conv1d with GroupNorm and GELU, then max and
    average pooling; a CTC head's log-probabilities over a 64-token vocabulary per frame
    (LogSoftmax over the channels)."""

    def __init__(self):
        super().__init__()
        layers = [nn.Conv1d(1, 128, 10, 5, bias=False), nn.GroupNorm(128, 128), nn.GELU()]
        for k, s in ((3, 2), (3, 2), (3, 2), (3, 2), (2, 2), (2, 2)):
            layers += [nn.Conv1d(128, 128, k, s, bias=False), nn.GELU()]
        self.features = nn.Sequential(*layers)
        self.pool = nn.MaxPool1d(3, 2, padding=1)
        self.avg = nn.AvgPool1d(3, 1, padding=1, count_include_pad=False)
        self.proj = nn.Conv1d(128, 64, 1)

    def forward(self, wav):
        return self.proj(self.avg(self.pool(self.features(wav)))).log_softmax(1)


class Tcn(nn.Module):
    """WaveNet-like gated residual stack: dilated causal Conv1d (1..64), BatchNorm1d."""

    def __init__(self, ch=64):
        super().__init__()
        self.inp = nn.Conv1d(40, ch, 1)
        self.filters = nn.ModuleList(nn.Conv1d(ch, 2 * ch, 3, dilation=d, padding=d)
                                     for d in (1, 2, 4, 8, 16, 32, 64))
        self.norms = nn.ModuleList(nn.BatchNorm1d(ch) for _ in range(7))
        self.res = nn.ModuleList(nn.Conv1d(ch, ch, 1) for _ in range(7))
        self.out = nn.Conv1d(ch, 32, 1)

    def forward(self, x):
        h = self.inp(x)
        for f, n, r in zip(self.filters, self.norms, self.res):
            a, b = f(h).chunk(2, dim=1)
            h = h + r(n(torch.tanh(a) * torch.sigmoid(b)))
        return self.out(h)


class DeconvDecoder(nn.Module):
    """A DCGAN-like generator (ConvTranspose 4x4 stride 2), then a 3x3 stride 2 ConvTranspose with
    output padding, a 2x2 stride 2 one, and a ConvTranspose1d head over the rows."""

    def __init__(self):
        super().__init__()
        def up(i, o, k, s, p, op=0):
            return [nn.ConvTranspose2d(i, o, k, s, p, output_padding=op, bias=False),
                    nn.BatchNorm2d(o), nn.ReLU()]
        self.net = nn.Sequential(*up(64, 256, 4, 1, 0), *up(256, 128, 4, 2, 1),
                                 *up(128, 64, 4, 2, 1), *up(64, 32, 3, 2, 1, 1),
                                 *up(32, 16, 2, 2, 0), nn.Conv2d(16, 3, 3, padding=1), nn.Tanh())
        self.rows = nn.ConvTranspose1d(64, 16, 5, stride=3, padding=1)

    def forward(self, z):
        img = self.net(z)
        return img, self.rows(img.flatten(1, 2)[:, :64, :])


class GroupedDeconv(nn.Module):
    """A mobile decoder: depthwise ConvTranspose upsampling (4x4 stride 2; 3x3 stride 2 with output
    padding and two output channels per input one) between pointwise convolutions, a dilated
    depthwise one, and a grouped one (8 channels per group)."""

    def __init__(self):
        super().__init__()
        self.stem = nn.Conv2d(3, 64, 3, stride=2, padding=1)
        self.up1 = nn.ConvTranspose2d(64, 64, 4, stride=2, padding=1, groups=64)
        self.pw = nn.Conv2d(64, 32, 1)
        self.up2 = nn.ConvTranspose2d(32, 64, 3, stride=2, padding=1, output_padding=1, groups=32)
        self.dil = nn.ConvTranspose2d(64, 64, 3, padding=2, dilation=2, groups=64)
        self.grouped = nn.ConvTranspose2d(64, 16, 3, padding=1, groups=8)
        self.head = nn.Conv2d(16, 3, 1)

    def forward(self, x):
        y = torch.relu(self.stem(x))
        y = torch.relu(self.up1(y))
        y = torch.relu(self.pw(y))
        y = torch.relu(self.up2(y))
        y = torch.relu(self.dil(y))
        return self.head(torch.relu(self.grouped(y)))


class UNetNorms(nn.Module):
    """A small U-Net: InstanceNorm and GroupNorm blocks, max-pool down, bilinear and nearest up,
    skip Concats; class probabilities per pixel (Softmax over the channels)."""

    def __init__(self):
        super().__init__()
        def block(i, o, norm):
            return nn.Sequential(nn.Conv2d(i, o, 3, padding=1), norm(o), nn.LeakyReLU(0.1),
                                 nn.Conv2d(o, o, 3, padding=1), norm(o), nn.LeakyReLU(0.1))
        inorm = lambda c: nn.InstanceNorm2d(c, affine=True)
        gnorm = lambda c: nn.GroupNorm(8, c)
        self.e1, self.e2, self.e3 = block(3, 32, inorm), block(32, 64, gnorm), block(64, 128, gnorm)
        self.pool = nn.MaxPool2d(2)
        self.up_bilinear = nn.Upsample(scale_factor=2, mode="bilinear", align_corners=False)
        self.up_nearest = nn.Upsample(scale_factor=2, mode="nearest")
        self.d2, self.d1 = block(192, 64, gnorm), block(96, 32, inorm)
        self.head = nn.Conv2d(32, 5, 1)

    def forward(self, x):
        a = self.e1(x)
        b = self.e2(self.pool(a))
        c = self.e3(self.pool(b))
        d = self.d2(torch.cat([self.up_bilinear(c), b], 1))
        return self.head(self.d1(torch.cat([self.up_nearest(d), a], 1))).softmax(1)


class PixelShuffleSR(nn.Module):
    """ESPCN-like x3 super-resolution (PixelShuffle), plus a bicubic-upsampled skip."""

    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Conv2d(1, 64, 5, padding=2), nn.Tanh(),
                                 nn.Conv2d(64, 32, 3, padding=1), nn.Tanh(),
                                 nn.Conv2d(32, 9, 3, padding=1), nn.PixelShuffle(3))
        self.skip = nn.Upsample(scale_factor=3, mode="bicubic", align_corners=False)

    def forward(self, x):
        return self.net(x) + self.skip(x)


class ConvZoo(nn.Module):
    """Convolution shapes beside the common ones: grouped with 2, 8 and 24 channels per group,
    depthwise with multiplier 2, an ASPP whose dilations (6, 18, 36) put most taps into padding on
    a 12x12 map, a 3-D branch (Conv3d, MaxPool3d, AvgPool3d) and a 1-D branch."""

    def __init__(self):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 48, 3, 2, 1), nn.BatchNorm2d(48), nn.ReLU())
        self.g2 = nn.Conv2d(48, 48, 3, padding=1, groups=24)
        self.g8 = nn.Conv2d(48, 96, 3, 2, 1, groups=6)
        self.dw2 = nn.Conv2d(96, 192, 3, padding=1, groups=96)
        self.g24 = nn.Conv2d(192, 96, 3, padding=1, groups=8)
        self.bn = nn.BatchNorm2d(96)
        self.aspp = nn.ModuleList(nn.Conv2d(96, 32, 3, padding=d, dilation=d) for d in (6, 18, 36))
        self.c3 = nn.Sequential(nn.Conv3d(8, 16, 3, padding=1), nn.BatchNorm3d(16), nn.ReLU(),
                                nn.MaxPool3d(2), nn.Conv3d(16, 16, (1, 3, 3), padding=(0, 1, 1),
                                                           groups=4),
                                nn.AvgPool3d(2))
        self.c1 = nn.Sequential(nn.Conv1d(96, 64, 5, padding=2, groups=4), nn.ReLU(),
                                nn.MaxPool1d(2), nn.Conv1d(64, 64, 3, dilation=3, padding=3),
                                nn.AvgPool1d(2))

    def forward(self, x):
        h = self.stem(x)                                # 48 x 48 x 48
        h = torch.relu(self.g2(h)) + h
        h = torch.relu(self.bn(self.g24(torch.relu(self.dw2(self.g8(h))))))  # 96 x 24 x 24
        s = nn.functional.max_pool2d(h, 2)              # 96 x 12 x 12
        aspp = torch.cat([torch.relu(a(s)) for a in self.aspp], 1)
        vol = self.c3(h.reshape(1, 8, 12, 24, 24))      # 16 x 3 x 6 x 6
        seq = self.c1(h.flatten(2))                     # 64 x 144
        return aspp, vol, seq


# name -> (module class, inputs: name -> shape, or name -> array for fixed ones)
def _pad_mask(n, valid):
    m = np.zeros((1, n), dtype=np.bool_)
    m[0, valid:] = True
    return m


CASES = {
    "transformer_encoder": (TransformerEncoder, {"x": (1, 64, 256), "pad": _pad_mask(64, 52)}),
    "transformer_decoder": (TransformerDecoder, {"tgt": (1, 32, 256), "memory": (1, 48, 256)}),
    "mha_masks": (MhaMasks, {"q": (1, 32, 256), "kv": (1, 48, 256), "attn_mask": (32, 48),
                             "pad": _pad_mask(48, 40)}),
    "audio_conv1d": (AudioConv, {"wav": (1, 1, 16000)}),
    "tcn": (Tcn, {"x": (1, 40, 400)}),
    "deconv_decoder": (DeconvDecoder, {"z": (1, 64, 1, 1)}),
    "grouped_deconv": (GroupedDeconv, {"x": (1, 3, 96, 96)}),
    "unet_norms": (UNetNorms, {"x": (1, 3, 96, 96)}),
    "pixelshuffle_sr": (PixelShuffleSR, {"x": (1, 1, 96, 96)}),
    "conv_zoo": (ConvZoo, {"x": (1, 3, 96, 96)}),
}


def export(name, out_dir, seed=0):
    cls, inputs = CASES[name]
    torch.manual_seed(seed)
    model = cls().eval()
    g = torch.Generator().manual_seed(seed)
    args = tuple(torch.from_numpy(v) if isinstance(v, np.ndarray) else torch.randn(v, generator=g)
                 for v in inputs.values())
    # BatchNorm statistics from other draws of the same shapes.
    g2 = torch.Generator().manual_seed(seed + 2000)
    randomise_norms(model, tuple(a if a.dtype == torch.bool else torch.randn(a.shape, generator=g2)
                                 for a in args), seed)
    with torch.no_grad():
        out = model(*args)
    outs = out if isinstance(out, (tuple, list)) else (out,)
    names = ["output"] if len(outs) == 1 else [f"output_{i}" for i in range(len(outs))]
    for n, o in zip(names, outs):  # PyTorch's own outputs: check_corpus.py's noise floor
        np.save(os.path.join(out_dir, f"{name}.torch.{n}.npy"), o.numpy())
    path = os.path.join(out_dir, name + ".onnx")
    torch.onnx.export(model, args, path, opset_version=17, input_names=list(inputs),
                      output_names=names)
    for k, v in zip(inputs, args):  # the reference inputs
        np.save(os.path.join(out_dir, f"{name}.{k}.npy"), v.numpy())
    return [path]


"""Recurrent and control-flow models for the corpus: nn.LSTM and nn.GRU (2 layers, bidirectional,
batch_first, initial states), a greedy decoding loop over a small GRU cell (a data-dependent
Loop: it stops at the end token or at a maximum length), a streaming voice-activity model of
the kind speech apps embed (an If choosing the branch for the sample rate, LSTM state taken and
returned on every call), and Mask R-CNN's mask pasting (a Loop appending one full-image mask per
detection to the masks so far). Random weights (seeded); opset 17.

Each export function writes ONNX files and returns their paths.
"""
import os

import torch
import torch.nn.functional as F
from torch import nn


class LstmModel(nn.Module):
    def __init__(self, rnn):
        super().__init__()
        self.rnn = rnn

    def forward(self, x, h0, c0):
        y, (h, c) = self.rnn(x, (h0, c0))
        return y, h, c


class GruModel(nn.Module):
    def __init__(self, rnn):
        super().__init__()
        self.rnn = rnn

    def forward(self, x, h0):
        y, h = self.rnn(x, h0)
        return y, h


def export_lstm(out_dir, seed=0, seq=200, features=64, hidden=128):
    """lstm.onnx: x [1, seq, 64], h0/c0 [4, 1, 128] -> y [1, seq, 256], h, c [4, 1, 128]."""
    torch.manual_seed(seed)
    m = LstmModel(nn.LSTM(features, hidden, num_layers=2, bidirectional=True, batch_first=True))
    m.eval()
    x = torch.randn(1, seq, features)
    h0 = torch.randn(4, 1, hidden) * 0.1
    c0 = torch.randn(4, 1, hidden) * 0.1
    path = os.path.join(out_dir, "lstm.onnx")
    torch.onnx.export(m, (x, h0, c0), path, input_names=["x", "h0", "c0"],
                      output_names=["y", "h", "c"],
                      dynamic_axes={"x": {0: "batch", 1: "seq"}, "h0": {1: "batch"},
                                    "c0": {1: "batch"}, "y": {0: "batch", 1: "seq"}},
                      opset_version=17)
    return [path]


def export_gru(out_dir, seed=0, seq=200, features=64, hidden=128):
    """gru.onnx: x [1, seq, 64], h0 [4, 1, 128] -> y [1, seq, 256], h [4, 1, 128]."""
    torch.manual_seed(seed)
    m = GruModel(nn.GRU(features, hidden, num_layers=2, bidirectional=True, batch_first=True))
    m.eval()
    x = torch.randn(1, seq, features)
    h0 = torch.randn(4, 1, hidden) * 0.1
    path = os.path.join(out_dir, "gru.onnx")
    torch.onnx.export(m, (x, h0), path, input_names=["x", "h0"], output_names=["y", "h"],
                      dynamic_axes={"x": {0: "batch", 1: "seq"}, "h0": {1: "batch"},
                                    "y": {0: "batch", 1: "seq"}},
                      opset_version=17)
    return [path]


class GreedyDecoder(nn.Module):
    """Greedy decoding over a GRU cell: embeds the last token, steps the cell, picks the argmax,
    until the end token or max_len tokens (a Loop whose condition is computed)."""

    def __init__(self, vocab=64, hidden=96, end_token=1):
        super().__init__()
        self.embed = nn.Embedding(vocab, hidden)
        # The GRU cell written out (the exporter has no symbolic for a scripted GRUCell).
        self.wx = nn.Linear(hidden, 3 * hidden)
        self.wh = nn.Linear(hidden, 3 * hidden)
        self.out = nn.Linear(hidden, vocab)
        self.end_token = end_token

    def cell(self, x, h):
        xr, xz, xn = self.wx(x).chunk(3, dim=-1)
        hr, hz, hn = self.wh(h).chunk(3, dim=-1)
        r = torch.sigmoid(xr + hr)
        z = torch.sigmoid(xz + hz)
        n = torch.tanh(xn + r * hn)
        return (1 - z) * n + z * h

    def forward(self, h, first, max_len):
        token = first
        tokens = torch.zeros(0, dtype=torch.long)
        i = torch.zeros((), dtype=torch.long)
        go = i < max_len
        while bool(go):
            h = self.cell(self.embed(token), h)
            token = self.out(h).argmax(dim=-1)
            tokens = torch.cat([tokens, token])
            i = i + 1
            go = torch.logical_and(token[0] != self.end_token, i < max_len)
        return tokens, h


def export_greedy_loop(out_dir, seed=0):
    """greedy_loop.onnx: h [1, 96], first int64 [1], max_len int64 [] -> tokens int64 [n], h."""
    torch.manual_seed(seed)
    m = torch.jit.script(GreedyDecoder().eval())
    h = torch.randn(1, 96)
    first = torch.tensor([3])
    max_len = torch.tensor(40)
    path = os.path.join(out_dir, "greedy_loop.onnx")
    torch.onnx.export(m, (h, first, max_len), path, input_names=["h", "first", "max_len"],
                      output_names=["tokens", "h_out"], opset_version=17)
    return [path]


class StreamingVad(nn.Module):
    """A streaming voice-activity detector: a chunk of samples and the LSTM state in, the speech
    probability and the new state out; the front end depends on the sample rate (an If)."""

    def __init__(self, hidden=64):
        super().__init__()
        self.front16 = nn.Conv1d(1, 32, kernel_size=8, stride=4)
        self.front8 = nn.Conv1d(1, 32, kernel_size=4, stride=2)
        self.lstm = nn.LSTM(32, hidden, batch_first=True)
        self.head = nn.Linear(hidden, 1)

    def forward(self, x, sr, h, c):
        if bool(sr == 16000):
            f = torch.relu(self.front16(x.unsqueeze(1)))
        else:
            f = torch.relu(self.front8(x.unsqueeze(1)))
        f = f.mean(dim=2, keepdim=True).transpose(1, 2)
        y, (h2, c2) = self.lstm(f, (h, c))
        return torch.sigmoid(self.head(y[:, -1])), h2, c2


def export_streaming_vad(out_dir, seed=0):
    """streaming_vad.onnx: x [1, 512], sr int64 [], h/c [1, 1, 64] -> prob [1, 1], h, c."""
    torch.manual_seed(seed)
    m = torch.jit.script(StreamingVad().eval())
    x = torch.randn(1, 512)
    sr = torch.tensor(16000)
    h = torch.zeros(1, 1, 64)
    c = torch.zeros(1, 1, 64)
    path = os.path.join(out_dir, "streaming_vad.onnx")
    torch.onnx.export(m, (x, sr, h, c), path, input_names=["x", "sr", "h", "c"],
                      output_names=["prob", "h_out", "c_out"], opset_version=17)
    return [path]


def paste_one(mask, box, im_h, im_w):
    """torchvision's _onnx_paste_mask_in_image: mask [28, 28] resized to box (int64 x0, y0, x1,
    y1), clipped to the image and padded (Concat with zeros) into an [im_h, im_w] canvas."""
    one = torch.ones(1, dtype=torch.int64)
    zero = torch.zeros(1, dtype=torch.int64)
    w = torch.max(torch.cat((box[2:3] - box[0:1] + one, one)))
    h = torch.max(torch.cat((box[3:4] - box[1:2] + one, one)))
    m = F.interpolate(mask.expand((1, 1, mask.size(0), mask.size(1))), size=(int(h), int(w)),
                      mode="bilinear", align_corners=False)[0][0]
    x_0 = torch.max(torch.cat((box[0].unsqueeze(0), zero)))
    x_1 = torch.min(torch.cat((box[2].unsqueeze(0) + one, im_w.unsqueeze(0))))
    y_0 = torch.max(torch.cat((box[1].unsqueeze(0), zero)))
    y_1 = torch.min(torch.cat((box[3].unsqueeze(0) + one, im_h.unsqueeze(0))))
    m = m[(y_0 - box[1]):(y_1 - box[1]), (x_0 - box[0]):(x_1 - box[0])]
    m = torch.cat((torch.zeros(y_0, m.size(1)), m, torch.zeros(im_h - y_1, m.size(1))), 0)[0:im_h]
    return torch.cat((torch.zeros(m.size(0), x_0), m, torch.zeros(m.size(0), im_w - x_1)),
                     1)[:, :im_w]


class PasteMasks(nn.Module):
    """Mask R-CNN's last step as torchvision exports it: each detection's mask probabilities are
    pasted into a full-image canvas at its box, one detection per Loop iteration, and appended to
    the canvases so far (torch.cat onto the loop-carried tensor)."""

    def __init__(self, height: int = 160, width: int = 160):
        super().__init__()
        self.height = height
        self.width = width

    def forward(self, masks, boxes):
        probs = torch.sigmoid(masks)
        size = torch.tensor([self.width, self.height, self.width, self.height],
                            dtype=torch.float32)
        b = torch.sigmoid(boxes) * size  # boxes inside the image, corners in either order
        corners = torch.cat((torch.min(b[:, 0:2], b[:, 2:4]), torch.max(b[:, 0:2], b[:, 2:4])), 1)
        ib = corners.to(torch.int64)
        im_h = torch.tensor(self.height, dtype=torch.int64)
        im_w = torch.tensor(self.width, dtype=torch.int64)
        out = torch.zeros(0, self.height, self.width)
        for i in range(masks.size(0)):
            out = torch.cat((out, paste_one(probs[i][0], ib[i], im_h, im_w).unsqueeze(0)))
        return out


def export_paste_masks(out_dir, seed=0):
    """paste_masks.onnx: masks [N, 1, 28, 28] logits, boxes [N, 4] -> pasted [N, 160, 160]."""
    torch.manual_seed(seed)
    m = torch.jit.script(PasteMasks().eval())
    path = os.path.join(out_dir, "paste_masks.onnx")
    torch.onnx.export(m, (torch.randn(8, 1, 28, 28), torch.randn(8, 4)), path,
                      input_names=["masks", "boxes"], output_names=["pasted"], opset_version=17,
                      dynamic_axes={"masks": {0: "n"}, "boxes": {0: "n"}})
    return [path]

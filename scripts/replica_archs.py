"""PyTorch architectures of the models livecam runs, for random-weight benchmark replicas.

Speed does not depend on weight values, so a replica with the real model's layers, widths,
tensor names and shapes costs what the real model costs. Written from the published
architecture descriptions (see issue 8), not from any other project's code:

- ScrfdDet10g: SCRFD-10GF with keypoints (det_10g.onnx): ResNetV1e-style backbone, PAFPN neck,
  per-stride heads; 9 outputs (scores, boxes, keypoints for strides 8/16/32).
- IResNet50: ArcFace R50 (w600k_r50.onnx), 112x112 -> 512.
- Inswapper128: encoder, six latent-modulated style blocks at 32x32, decoder (inswapper_128.onnx).
- GFPGANv1Clean: livecam.models.gfpgan_arch (shared with `livecam models convert`).
- CodeFormerReplica: CodeFormer (codeformer.onnx): VQGAN encoder, 9-layer transformer code
  prediction, codebook lookup, VQGAN decoder with fidelity-weighted fuses at 32..256 px.
- GpenBfr: GPEN-BFR 256 and 512 (gpen_bfr_256.onnx, gpen_bfr_512.onnx): conv encoder, mapping
  MLP, StyleGAN2 generator fed the encoder's maps as concatenated noise.
- Landmark106: a stand-in for insightface's 2d106det.onnx (192x192 face crop -> 212 values, the
  106 points). That model is not one livecam runs; the Deep-Live-Cam-style baseline does. Its
  architecture is not published: this is a MobileNetV1-style regressor sized to the real
  file's parameters (5,030,888 bytes of fp32, about 1.25 M), so its compute is an estimate.

`count(model, inputs)` gives (parameters, MACs) with torch's FLOP counter (2 FLOPs per MAC),
which sees functional convolutions (GFPGAN's modulated convs) as well as modules.
Needs torch; only the benchmark scripts import this file.
"""

from __future__ import annotations

import math

import torch
from torch import nn
from torch.nn import functional as F

from livecam.models.gfpgan_arch import GfpganConfig, GFPGANv1Clean, NormStyleCode  # noqa: F401 - re-exported

# ----------------------------------------------------------------------------- helpers


def conv_bn_relu(cin: int, cout: int, k: int = 3, s: int = 1, relu: bool = True) -> nn.Sequential:
    layers: list[nn.Module] = [nn.Conv2d(cin, cout, k, s, k // 2, bias=False), nn.BatchNorm2d(cout)]
    if relu:
        layers.append(nn.ReLU(inplace=True))
    return nn.Sequential(*layers)


def count(model: nn.Module, inputs: tuple[torch.Tensor, ...]) -> tuple[int, int]:
    """(parameters, multiply-accumulates of one forward pass on `inputs`)."""
    from torch.utils.flop_counter import FlopCounterMode

    params = sum(p.numel() for p in model.parameters())
    with torch.no_grad(), FlopCounterMode(display=False) as counter:
        model(*inputs)
    return params, counter.get_total_flops() // 2


def randomize_bn(model: nn.Module, seed: int = 0) -> None:
    """Plausible running statistics, so random activations neither vanish nor explode."""
    g = torch.Generator().manual_seed(seed)
    for m in model.modules():
        if isinstance(m, (nn.BatchNorm2d, nn.BatchNorm1d)):
            m.running_mean.copy_(torch.randn(m.num_features, generator=g) * 0.1)
            m.running_var.copy_(torch.rand(m.num_features, generator=g) * 0.5 + 0.75)


# ----------------------------------------------------------------------------- SCRFD-10GF (det_10g)

# A random-weight detector finds no face (or dozens), and then nothing downstream runs. So the
# heads' outputs are damped (x 0.01, still computed in full) and added to a fixed prior: one face
# whose box and keypoints sit at the centre of a 640x360 picture letterboxed into the 640x640
# input (the centre of a 16:9 frame), about 100x120 px there. Every other anchor scores
# sigmoid(-10). The prior maps cover inputs up to 640x640; the face cell exists from 352 px up
# (det sizes 480 and 640; at 320 the replica reports no face).
DAMP = 0.01
FACE_BOX = (270.0, 110.0, 370.0, 230.0)  # x1, y1, x2, y2 in the 640 input
FACE_KPS = ((297.0, 150.0), (343.0, 150.0), (320.0, 175.0), (301.0, 200.0), (339.0, 200.0))


def add_face_prior(module: nn.Module, anchors: int = 2) -> None:
    stride, cells = 32, 640 // 32
    cy, cx = 5, 10  # the anchor cell at (320, 160)
    ax, ay = cx * stride, cy * stride
    cls = torch.full((1, anchors, cells, cells), -10.0)
    cls[0, 0, cy, cx] = 10.0
    reg = torch.ones(1, anchors * 4, cells, cells)
    x1, y1, x2, y2 = FACE_BOX
    reg[0, 0:4, cy, cx] = torch.tensor([ax - x1, ay - y1, x2 - ax, y2 - ay]) / stride
    kps = torch.zeros(1, anchors * 10, cells, cells)
    offsets = [((px - ax) / stride, (py - ay) / stride) for px, py in FACE_KPS]
    kps[0, 0:10, cy, cx] = torch.tensor([v for xy in offsets for v in xy])
    module.register_buffer("prior_cls", cls)
    module.register_buffer("prior_reg", reg)
    module.register_buffer("prior_kps", kps)


def scrfd_outputs(module: nn.Module, heads: list[tuple[torch.Tensor, torch.Tensor, torch.Tensor]]
                  ) -> tuple[torch.Tensor, ...]:
    """The nine det_10g outputs from per-stride (cls, reg, kps) maps, with the face prior."""
    scores, boxes, kps = [], [], []
    last = len(heads) - 1
    for i, (c, r, k) in enumerate(heads):
        c, r, k = c * DAMP, r * DAMP, k * DAMP
        if i == last:  # the one face sits at stride 32
            h, w = c.shape[2], c.shape[3]
            c = c + module.prior_cls[:, :, :h, :w]
            r = r + module.prior_reg[:, :, :h, :w]
            k = k + module.prior_kps[:, :, :h, :w]
        else:
            c = c - 10.0
            r = r + 1.0
        scores.append(torch.sigmoid(c).permute(0, 2, 3, 1).reshape(-1, 1))
        boxes.append(F.relu(r).permute(0, 2, 3, 1).reshape(-1, 4))
        kps.append(k.permute(0, 2, 3, 1).reshape(-1, 10))
    return (*scores, *boxes, *kps)


class BasicBlock(nn.Module):
    def __init__(self, cin: int, cout: int, stride: int) -> None:
        super().__init__()
        self.conv1 = conv_bn_relu(cin, cout, 3, stride)
        self.conv2 = conv_bn_relu(cout, cout, 3, 1, relu=False)
        self.down: nn.Module = nn.Identity()
        if stride != 1 or cin != cout:
            # ResNet-D shortcut: average-pool first, then a 1x1 conv without stride.
            pool: nn.Module = nn.AvgPool2d(stride, stride, ceil_mode=True) if stride > 1 else nn.Identity()
            self.down = nn.Sequential(pool, nn.Conv2d(cin, cout, 1, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.relu(self.conv2(self.conv1(x)) + self.down(x))


class ScrfdDet10g(nn.Module):
    STEM = (28, 28, 56)
    BLOCKS = (3, 4, 2, 3)
    WIDTHS = (56, 88, 88, 224)
    STRIDES = (1, 2, 2, 2)
    NECK = 56
    HEAD = 80
    ANCHORS = 2

    def __init__(self, div: int = 1) -> None:
        """`div` > 1 divides every width (tiny smoke-test replicas with the same I/O)."""
        super().__init__()
        self.STEM = tuple(max(4, v // div) for v in self.STEM)
        self.WIDTHS = tuple(max(4, v // div) for v in self.WIDTHS)
        self.NECK, self.HEAD = max(4, self.NECK // div), max(4, self.HEAD // div)
        a, b, c = self.STEM
        self.stem = nn.Sequential(conv_bn_relu(3, a, 3, 2), conv_bn_relu(a, b), conv_bn_relu(b, c),
                                  nn.MaxPool2d(2, 2))
        stages = []
        cin = c
        for n, width, stride in zip(self.BLOCKS, self.WIDTHS, self.STRIDES):
            blocks = [BasicBlock(cin, width, stride)] + [BasicBlock(width, width, 1) for _ in range(n - 1)]
            stages.append(nn.Sequential(*blocks))
            cin = width
        self.stages = nn.ModuleList(stages)
        ins = self.WIDTHS[1:]  # the neck takes strides 8, 16, 32
        n = self.NECK
        self.lateral = nn.ModuleList([nn.Conv2d(w, n, 1) for w in ins])
        self.fpn = nn.ModuleList([nn.Conv2d(n, n, 3, 1, 1) for _ in ins])
        self.down = nn.ModuleList([nn.Conv2d(n, n, 3, 2, 1) for _ in ins[1:]])
        self.pafpn = nn.ModuleList([nn.Conv2d(n, n, 3, 1, 1) for _ in ins[1:]])
        h, k = self.HEAD, self.ANCHORS
        self.towers = nn.ModuleList([nn.Sequential(conv_bn_relu(n, h), conv_bn_relu(h, h), conv_bn_relu(h, h))
                                     for _ in ins])
        self.cls = nn.ModuleList([nn.Conv2d(h, k * 1, 3, 1, 1) for _ in ins])
        self.reg = nn.ModuleList([nn.Conv2d(h, k * 4, 3, 1, 1) for _ in ins])
        self.kps = nn.ModuleList([nn.Conv2d(h, k * 10, 3, 1, 1) for _ in ins])
        self.scales = nn.Parameter(torch.ones(len(ins)))
        add_face_prior(self, self.ANCHORS)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        x = self.stem(x)
        feats = []
        for stage in self.stages:
            x = stage(x)
            feats.append(x)
        feats = feats[1:]
        lat = [conv(f) for conv, f in zip(self.lateral, feats)]
        for i in range(len(lat) - 1, 0, -1):  # top-down
            lat[i - 1] = lat[i - 1] + F.interpolate(lat[i], size=lat[i - 1].shape[2:], mode="nearest")
        inter = [conv(f) for conv, f in zip(self.fpn, lat)]
        for i in range(len(inter) - 1):  # bottom-up
            inter[i + 1] = inter[i + 1] + self.down[i](inter[i])
        outs = [inter[0]] + [conv(f) for conv, f in zip(self.pafpn, inter[1:])]
        heads = []
        for i, f in enumerate(outs):
            t = self.towers[i](f)
            heads.append((self.cls[i](t), self.reg[i](t) * self.scales[i], self.kps[i](t)))
        return scrfd_outputs(self, heads)



# The real file's output names, in its output order (scores 8/16/32, boxes, keypoints).
SCRFD_OUTPUTS = ("448", "471", "494", "451", "474", "497", "454", "477", "500")


# ----------------------------------------------------------------------------- ArcFace IResNet-50


class IBasicBlock(nn.Module):
    def __init__(self, cin: int, cout: int, stride: int) -> None:
        super().__init__()
        self.bn1 = nn.BatchNorm2d(cin, eps=1e-5)
        self.conv1 = nn.Conv2d(cin, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout, eps=1e-5)
        self.prelu = nn.PReLU(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, stride, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(cout, eps=1e-5)
        self.down: nn.Module = nn.Identity()
        if stride != 1 or cin != cout:
            self.down = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.bn3(self.conv2(self.prelu(self.bn2(self.conv1(self.bn1(x))))))
        return y + self.down(x)


class IResNet50(nn.Module):
    LAYERS = (3, 4, 14, 3)
    WIDTHS = (64, 128, 256, 512)

    def __init__(self, embedding: int = 512, div: int = 1) -> None:
        super().__init__()
        widths = [w // div for w in self.WIDTHS]
        self.conv1 = nn.Conv2d(3, widths[0], 3, 1, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(widths[0])
        self.prelu = nn.PReLU(widths[0])
        blocks = []
        cin = widths[0]
        for n, width in zip(self.LAYERS, widths):
            blocks.append(IBasicBlock(cin, width, 2))
            blocks += [IBasicBlock(width, width, 1) for _ in range(n - 1)]
            cin = width
        self.body = nn.Sequential(*blocks)
        self.bn2 = nn.BatchNorm2d(cin)
        self.fc = nn.Linear(cin * 7 * 7, embedding)
        self.features = nn.BatchNorm1d(embedding)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.body(self.prelu(self.bn1(self.conv1(x))))
        return self.features(self.fc(self.bn2(x).flatten(1)))


# ----------------------------------------------------------------------------- inswapper_128


class StyleBlock(nn.Module):
    """Conv, normalise (spatial mean and RMS), scale/shift from the latent, ReLU; again; add."""

    def __init__(self, channels: int, latent: int = 512) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(channels, channels, 3)
        self.conv2 = nn.Conv2d(channels, channels, 3)
        self.style1 = nn.Linear(latent, channels * 2)
        self.style2 = nn.Linear(latent, channels * 2)

    @staticmethod
    def modulate(x: torch.Tensor, style: torch.Tensor) -> torch.Tensor:
        x = x - x.mean(dim=(2, 3), keepdim=True)
        x = x * torch.rsqrt((x * x).mean(dim=(2, 3), keepdim=True) + 1e-8)
        scale, shift = style.unsqueeze(-1).unsqueeze(-1).chunk(2, dim=1)
        return x * scale + shift

    def forward(self, x: torch.Tensor, latent: torch.Tensor) -> torch.Tensor:
        y = self.conv1(F.pad(x, (1, 1, 1, 1), mode="reflect"))
        y = F.relu(self.modulate(y, self.style1(latent)))
        y = self.conv2(F.pad(y, (1, 1, 1, 1), mode="reflect"))
        return x + self.modulate(y, self.style2(latent))


class Inswapper128(nn.Module):
    def __init__(self, width: int = 128, blocks: int = 6, latent: int = 512) -> None:
        super().__init__()
        w = width
        self.enc0 = nn.Conv2d(3, w, 7)
        self.enc1 = nn.Conv2d(w, 2 * w, 3, 1, 1)
        self.enc2 = nn.Conv2d(2 * w, 4 * w, 3, 2, 1)
        self.enc3 = nn.Conv2d(4 * w, 8 * w, 3, 2, 1)
        self.blocks = nn.ModuleList([StyleBlock(8 * w, latent) for _ in range(blocks)])
        self.dec0 = nn.Conv2d(8 * w, 4 * w, 3, 1, 1)
        self.dec1 = nn.Conv2d(4 * w, 2 * w, 3, 1, 1)
        self.dec2 = nn.Conv2d(2 * w, w, 3, 1, 1)
        self.dec3 = nn.Conv2d(w, 3, 7)
        with torch.no_grad():  # keep random activations in range through the residual stack
            for block in self.blocks:
                for lin in (block.style1, block.style2):
                    lin.weight.mul_(0.1)
                    lin.bias.zero_()
                    lin.bias[: lin.out_features // 2].fill_(0.2)  # small scale, zero shift

    def forward(self, target: torch.Tensor, source: torch.Tensor) -> torch.Tensor:
        act = lambda t: F.leaky_relu(t, 0.2)  # noqa: E731
        x = act(self.enc0(F.pad(target, (3, 3, 3, 3), mode="reflect")))
        x = act(self.enc3(act(self.enc2(act(self.enc1(x))))))
        for block in self.blocks:
            x = block(x, source)
        x = act(self.dec0(F.interpolate(x, scale_factor=2, mode="bilinear", align_corners=False)))
        x = act(self.dec1(F.interpolate(x, scale_factor=2, mode="bilinear", align_corners=False)))
        x = act(self.dec2(x))
        x = torch.tanh(self.dec3(F.pad(x, (3, 3, 3, 3), mode="reflect")))
        return (x + 1) / 2



# ----------------------------------------------------------------------------- 2d106det (baseline only)


class DepthwiseSeparable(nn.Module):
    def __init__(self, cin: int, cout: int, stride: int) -> None:
        super().__init__()
        self.depthwise = nn.Sequential(nn.Conv2d(cin, cin, 3, stride, 1, groups=cin, bias=False),
                                       nn.BatchNorm2d(cin), nn.ReLU(inplace=True))
        self.pointwise = conv_bn_relu(cin, cout, k=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.pointwise(self.depthwise(x))


# (output width at width 1.0, stride) of each depthwise-separable block, MobileNetV1's layout
LANDMARK_BLOCKS = ((64, 1), (128, 2), (128, 1), (256, 2), (256, 1), (512, 2),
                   (512, 1), (512, 1), (512, 1), (512, 1), (512, 1), (1024, 2), (1024, 1))
LANDMARK_WIDTH = 0.59  # gives the real file's ~1.25 M parameters with the 212-wide regressor


class Landmark106(nn.Module):
    """192x192 crop in, 106 (x, y) pairs in [-1, 1] out, flattened to 212 as 2d106det's `fc1`."""

    def __init__(self, width: float = LANDMARK_WIDTH) -> None:
        super().__init__()
        ch = lambda c: max(4, int(round(c * width / 4)) * 4)  # noqa: E731
        layers: list[nn.Module] = [conv_bn_relu(3, ch(32), s=2)]
        cin = ch(32)
        for cout, stride in LANDMARK_BLOCKS:
            layers.append(DepthwiseSeparable(cin, ch(cout), stride))
            cin = ch(cout)
        self.features = nn.Sequential(*layers)
        self.fc1 = nn.Linear(cin, 212)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.features(x).mean(dim=(2, 3))
        return torch.tanh(self.fc1(x))



# ----------------------------------------------------------------------------- GPEN-BFR (256, 512)
# From the GPEN paper and its published model description (yangxy/GPEN): a plain conv encoder
# (1x1 conv, then blurred stride-2 3x3 convs down to 4x4) whose last map becomes the latent
# (through a linear layer and the 8-layer mapping MLP), and a StyleGAN2 generator whose noise
# inputs are the encoder's maps of the same size, concatenated (so every styled conv after the
# first sees twice its width). GPEN-BFR-512: channel multiplier 2, narrow 1; GPEN-BFR-256:
# channel multiplier 1, narrow 0.5.

GPEN_CONFIGS = {"gpen_bfr_512": (512, 2, 1.0), "gpen_bfr_256": (256, 1, 0.5)}  # size, multiplier, narrow


def gpen_channels(multiplier: int, narrow: float) -> dict[int, int]:
    wide = {4: 512, 8: 512, 16: 512, 32: 512, 64: 256 * multiplier, 128: 128 * multiplier,
            256: 64 * multiplier, 512: 32 * multiplier}
    return {res: int(c * narrow) for res, c in wide.items()}


def _blur_kernel(gain: float = 1.0) -> torch.Tensor:
    k = torch.tensor([1.0, 3.0, 3.0, 1.0])
    k = torch.outer(k, k)
    return k / k.sum() * gain


class Blur(nn.Module):
    """StyleGAN2's [1,3,3,1] low-pass, one channel at a time."""

    def __init__(self, channels: int, pad: tuple[int, int], gain: float = 1.0) -> None:
        super().__init__()
        self.channels, self.pad = channels, pad
        self.register_buffer("kernel", _blur_kernel(gain).expand(channels, 1, 4, 4).clone())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        a, b = self.pad
        return F.conv2d(F.pad(x, (a, b, a, b)), self.kernel, groups=self.channels)


class FusedLRelu(nn.Module):
    def __init__(self, channels: int) -> None:
        super().__init__()
        self.bias = nn.Parameter(torch.zeros(1, channels, 1, 1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.leaky_relu(x + self.bias, 0.2) * math.sqrt(2.0)


class GpenDown(nn.Module):
    """Encoder step: blur, then a stride-2 3x3 conv, bias and leaky ReLU."""

    def __init__(self, cin: int, cout: int) -> None:
        super().__init__()
        self.blur = Blur(cin, (2, 2))
        self.conv = nn.Conv2d(cin, cout, 3, 2, 0, bias=False)
        self.act = FusedLRelu(cout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.act(self.conv(self.blur(x)))


class GpenModConv(nn.Module):
    """StyleGAN2's modulated (and demodulated) conv for a batch of one, as the file's fixed
    [1,3,S,S] input has; `upsample`: a stride-2 transposed 3x3 conv, then the blur."""

    def __init__(self, cin: int, cout: int, kernel: int, style: int, demodulate: bool = True,
                 upsample: bool = False) -> None:
        super().__init__()
        self.cin, self.kernel, self.demodulate = cin, kernel, demodulate
        self.modulation = nn.Linear(style, cin)
        nn.init.constant_(self.modulation.bias, 1.0)
        self.weight = nn.Parameter(torch.randn(cout, cin, kernel, kernel) / math.sqrt(cin * kernel * kernel))
        self.blur = Blur(cout, (1, 1), gain=4.0) if upsample else None

    def forward(self, x: torch.Tensor, style: torch.Tensor) -> torch.Tensor:
        weight = self.weight * self.modulation(style).view(1, self.cin, 1, 1)  # static: the exporter needs it
        if self.demodulate:
            weight = weight * torch.rsqrt(weight.pow(2).sum([1, 2, 3], keepdim=True) + 1e-8)
        if self.blur is not None:
            return self.blur(F.conv_transpose2d(x, weight.transpose(0, 1), stride=2))
        return F.conv2d(x, weight, padding=self.kernel // 2)


class GpenStyledConv(nn.Module):
    """Modulated conv, then the encoder map of this size concatenated (GPEN's noise), bias, lrelu."""

    def __init__(self, cin: int, cout: int, style: int, upsample: bool = False) -> None:
        super().__init__()
        self.conv = GpenModConv(cin, cout, 3, style, upsample=upsample)
        self.noise_strength = nn.Parameter(torch.zeros(1))
        self.act = FusedLRelu(2 * cout)

    def forward(self, x: torch.Tensor, style: torch.Tensor, feature: torch.Tensor) -> torch.Tensor:
        out = self.conv(x, style)
        return self.act(torch.cat([out, feature * self.noise_strength], 1))


class GpenToRgb(nn.Module):
    def __init__(self, cin: int, style: int) -> None:
        super().__init__()
        self.conv = GpenModConv(cin, 3, 1, style, demodulate=False)
        self.bias = nn.Parameter(torch.zeros(1, 3, 1, 1))
        self.register_buffer("up", _blur_kernel(4.0).expand(3, 1, 4, 4).clone())

    def forward(self, x: torch.Tensor, style: torch.Tensor, skip: torch.Tensor | None) -> torch.Tensor:
        out = self.conv(x, style) + self.bias
        if skip is not None:  # zero-insertion upsampling and the blur, as one transposed conv
            out = out + F.conv_transpose2d(skip, self.up, stride=2, padding=1, groups=3)
        return out


class GpenBfr(nn.Module):
    """`input` [1,3,S,S] in [-1,1] -> `output` [1,3,S,S]."""

    def __init__(self, size: int, multiplier: int, narrow: float, style: int = 512, n_mlp: int = 8) -> None:
        super().__init__()
        ch = gpen_channels(multiplier, narrow)
        self.size = size
        self.log = int(math.log2(size))
        self.ecd0 = nn.Sequential(nn.Conv2d(3, ch[size], 1, bias=False), FusedLRelu(ch[size]))
        self.down = nn.ModuleList(GpenDown(ch[2 ** i], ch[2 ** (i - 1)]) for i in range(self.log, 2, -1))
        self.final_linear = nn.Linear(ch[4] * 16, style)
        mlp: list[nn.Module] = [NormStyleCode()]
        for _ in range(n_mlp):
            mlp += [nn.Linear(style, style), nn.LeakyReLU(0.2)]
        self.style = nn.Sequential(*mlp)
        self.const = nn.Parameter(torch.randn(1, ch[4], 4, 4))
        self.conv1 = GpenStyledConv(ch[4], ch[4], style)
        self.to_rgb1 = GpenToRgb(2 * ch[4], style)
        self.convs = nn.ModuleList()
        self.to_rgbs = nn.ModuleList()
        cin = ch[4]
        for i in range(3, self.log + 1):
            cout = ch[2 ** i]
            self.convs.append(GpenStyledConv(2 * cin, cout, style, upsample=True))
            self.convs.append(GpenStyledConv(2 * cout, cout, style))
            self.to_rgbs.append(GpenToRgb(2 * cout, style))
            cin = cout

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        feats = [self.ecd0(x)]
        for down in self.down:
            feats.append(down(feats[-1]))
        small_first = feats[::-1]  # 4x4, 8x8, ... SxS
        latent = self.style(F.leaky_relu(self.final_linear(feats[-1].flatten(1)), 0.2) * math.sqrt(2.0))
        out = self.conv1(self.const.repeat(x.shape[0], 1, 1, 1), latent, small_first[0])
        skip = self.to_rgb1(out, latent, None)
        for i, to_rgb in enumerate(self.to_rgbs):
            out = self.convs[2 * i](out, latent, small_first[i + 1])
            out = self.convs[2 * i + 1](out, latent, small_first[i + 1])
            skip = to_rgb(out, latent, skip)
        return skip



# ----------------------------------------------------------------------------- CodeFormer
# From the CodeFormer paper and its published model description (sczhou/CodeFormer): a VQGAN
# encoder (nf 64, widths x[1,2,2,4,4,8], two GroupNorm/swish res blocks per level, attention at
# 16x16) down to a 16x16x256 code map, a 9-layer transformer (512 wide, 8 heads, MLP 1024) that
# predicts one of 1024 codebook entries per position, the VQGAN decoder on the looked-up codes,
# and controllable feature transforms that mix encoder maps into the decoder at 32..256 px,
# scaled by the fidelity weight w (the file's `weight` input).

CODEFORMER_MULT = (1, 2, 2, 4, 4, 8)
CODEFORMER_FUSE = (32, 64, 128, 256)  # resolutions whose encoder maps reach the decoder


def group_norm(channels: int) -> nn.GroupNorm:
    return nn.GroupNorm(32, channels, eps=1e-6)


class VqResBlock(nn.Module):
    def __init__(self, cin: int, cout: int) -> None:
        super().__init__()
        self.body = nn.Sequential(group_norm(cin), nn.SiLU(), nn.Conv2d(cin, cout, 3, 1, 1),
                                  group_norm(cout), nn.SiLU(), nn.Conv2d(cout, cout, 3, 1, 1))
        self.skip = nn.Conv2d(cin, cout, 1) if cin != cout else nn.Identity()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.body(x) + self.skip(x)


class VqAttention(nn.Module):
    """Single-head self-attention over the positions of a (small) feature map."""

    def __init__(self, channels: int) -> None:
        super().__init__()
        self.norm = group_norm(channels)
        self.qkv = nn.Conv2d(channels, 3 * channels, 1)
        self.proj = nn.Conv2d(channels, channels, 1)
        self.channels = channels

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        c, h, w = self.channels, x.shape[2], x.shape[3]
        q, k, v = self.qkv(self.norm(x)).reshape(1, 3, c, h * w).unbind(1)
        att = torch.softmax(q.transpose(1, 2) @ k * c ** -0.5, dim=-1)  # (1, hw, hw)
        return x + self.proj((v @ att.transpose(1, 2)).reshape(1, c, h, w))


class VqDown(nn.Module):
    def __init__(self, channels: int) -> None:
        super().__init__()
        self.conv = nn.Conv2d(channels, channels, 3, 2, 0)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv(F.pad(x, (0, 1, 0, 1)))


class VqUp(nn.Module):
    def __init__(self, channels: int) -> None:
        super().__init__()
        self.conv = nn.Conv2d(channels, channels, 3, 1, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv(F.interpolate(x, scale_factor=2.0, mode="nearest"))


class FidelityFuse(nn.Module):
    """Encoder map + decoder map -> scale and shift, applied to the decoder map times w."""

    def __init__(self, channels: int) -> None:
        super().__init__()
        self.encode = VqResBlock(2 * channels, channels)

        def branch() -> nn.Sequential:
            return nn.Sequential(nn.Conv2d(channels, channels, 3, 1, 1), nn.LeakyReLU(0.2),
                                 nn.Conv2d(channels, channels, 3, 1, 1))

        self.scale, self.shift = branch(), branch()

    def forward(self, enc: torch.Tensor, dec: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        feat = self.encode(torch.cat([enc, dec], 1))
        return dec + w * (dec * self.scale(feat) + self.shift(feat))


class CodeFormerReplica(nn.Module):
    """`input` [1,3,512,512] in [-1,1] and `weight` float64 [1] -> the restored face [1,3,512,512]."""

    def __init__(self, nf: int = 64, dim: int = 512, layers: int = 9, heads: int = 8, codes: int = 1024,
                 code_dim: int = 256) -> None:
        super().__init__()
        widths = [nf * m for m in CODEFORMER_MULT]
        # encoder: (module, resolution after it, whether its output feeds a fuse)
        enc: list[nn.Module] = [nn.Conv2d(3, nf, 3, 1, 1)]
        taps: dict[int, int] = {}  # block index -> resolution whose map is kept
        cin, res = nf, 512
        for level, cout in enumerate(widths):
            for _ in range(2):
                enc.append(VqResBlock(cin, cout))
                cin = cout
                if res == 16:
                    enc.append(VqAttention(cin))
            if res in CODEFORMER_FUSE:
                taps[len(enc) - 1] = res
            if level != len(widths) - 1:
                enc.append(VqDown(cin))
                res //= 2
        enc += [VqResBlock(cin, cin), VqAttention(cin), VqResBlock(cin, cin), group_norm(cin),
                nn.Conv2d(cin, code_dim, 3, 1, 1)]
        self.encoder = nn.ModuleList(enc)
        self.taps = taps
        self.position = nn.Parameter(torch.randn(256, 1, dim) * 0.02)
        self.feat_emb = nn.Linear(code_dim, dim)
        self.transformer = nn.ModuleList(
            nn.TransformerEncoderLayer(dim, heads, 2 * dim, dropout=0.0, activation="gelu", norm_first=True)
            for _ in range(layers))
        self.idx_pred = nn.Sequential(nn.LayerNorm(dim), nn.Linear(dim, codes, bias=False))
        self.codebook = nn.Parameter(torch.randn(codes, code_dim))
        # decoder: fuse after the first res block of each fused resolution
        dec: list[nn.Module] = [nn.Conv2d(code_dim, widths[-1], 3, 1, 1), VqResBlock(widths[-1], widths[-1]),
                                VqAttention(widths[-1]), VqResBlock(widths[-1], widths[-1])]
        fuse_at: dict[int, int] = {}
        cin, res = widths[-1], 16
        for level in reversed(range(len(widths))):
            cout = widths[level]
            for i in range(2):
                dec.append(VqResBlock(cin, cout))
                cin = cout
                if i == 0 and res in CODEFORMER_FUSE:
                    fuse_at[len(dec) - 1] = res
                if res == 16:
                    dec.append(VqAttention(cin))
            if level != 0:
                dec.append(VqUp(cin))
                res *= 2
        dec += [group_norm(cin), nn.Conv2d(cin, 3, 3, 1, 1)]
        self.decoder = nn.ModuleList(dec)
        self.fuse_at = fuse_at
        self.fuse = nn.ModuleDict({str(r): FidelityFuse(widths[int(math.log2(512 // r))]) for r in CODEFORMER_FUSE})

    def forward(self, x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
        kept: dict[int, torch.Tensor] = {}
        for i, block in enumerate(self.encoder):
            x = block(x)
            if i in self.taps:
                kept[self.taps[i]] = x
        tokens = self.feat_emb(x.flatten(2).permute(2, 0, 1))  # (256, 1, dim)
        for layer in self.transformer:
            tokens = layer(tokens + self.position)  # (the original adds the position to q and k only)
        codes = self.idx_pred(tokens).argmax(-1).flatten()  # (256,)
        x = self.codebook[codes].transpose(0, 1).reshape(1, -1, 16, 16)
        w = weight.to(x.dtype).reshape(1, 1, 1, 1)
        for i, block in enumerate(self.decoder):
            x = block(x)
            if i in self.fuse_at:
                res = self.fuse_at[i]
                x = self.fuse[str(res)](kept[res], x, w)
        return x


# ----------------------------------------------------------------------------- trivial models


class TrivialScrfd(nn.Module):
    """det_10g's inputs and outputs (same face prior) from average pools and 1x1 convs: what
    remains of a frame's cost with it is livecam's (or the baseline's) own CPU work."""

    def __init__(self) -> None:
        super().__init__()
        self.heads = nn.ModuleList([nn.Conv2d(3, 2 + 8 + 20, 1) for _ in (8, 16, 32)])
        add_face_prior(self)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        heads = []
        for head, stride in zip(self.heads, (8, 16, 32)):
            y = head(F.avg_pool2d(x, stride))
            heads.append((y[:, :2], y[:, 2:10], y[:, 10:]))
        return scrfd_outputs(self, heads)


class TrivialArcFace(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(3, 512)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(x.mean(dim=(2, 3)))


class TrivialInswapper(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 3, 1)
        self.fc = nn.Linear(512, 3)

    def forward(self, target: torch.Tensor, source: torch.Tensor) -> torch.Tensor:
        return torch.sigmoid(self.conv(target) + self.fc(source).unsqueeze(-1).unsqueeze(-1))


class TrivialLandmark(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc1 = nn.Linear(3, 212)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.tanh(self.fc1(x.mean(dim=(2, 3))))


class TrivialGfpgan(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 3, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.tanh(self.conv(x))


class TrivialCodeFormer(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 3, 1)

    def forward(self, x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
        return torch.tanh(self.conv(x)) * weight.to(x.dtype).reshape(1, 1, 1, 1)


# ----------------------------------------------------------------------------- the table


# name -> (builder, example inputs at full size, issue figures: parameters, MACs)
ISSUE_FIGURES = {
    "det_10g": (4.23e6, 13.3e9),
    "w600k_r50": (43.6e6, 6.3e9),
    "inswapper_128": (138.3e6, 174.6e9),
    "gfpgan_1.4": (84e6, 197.8e9),
    # not in the issue: parameters from the real files' sizes (fp32); MACs are what the replica computes
    "gpen_bfr_256": (75_792_988 / 4, None),
    "gpen_bfr_512": (284_340_240 / 4, None),
    "codeformer": (376_951_650 / 4, None),
    # not in the issue: parameters from the real file's size; MACs are what this replica computes
    "2d106det": (1.25e6, None),
}


def build(name: str, div: int = 1, trivial: bool = False) -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    """The replica (eval mode, random weights) and one example input; `div` > 1 builds a
    narrow copy with the same inputs and outputs (for smoke tests); `trivial` a model of the
    same signature that computes next to nothing (for measuring the CPU work around models)."""
    torch.manual_seed(0)
    if trivial:
        model, inputs = build(name, div=32)
        base = "inswapper_128" if name == "inswapper_128_fp16" else name
        cls = {"det_10g": TrivialScrfd, "w600k_r50": TrivialArcFace, "inswapper_128": TrivialInswapper,
               "gfpgan_1.4": TrivialGfpgan, "gpen_bfr_256": TrivialGfpgan, "gpen_bfr_512": TrivialGfpgan,
               "codeformer": TrivialCodeFormer,
               "2d106det": TrivialLandmark}[base]
        return cls().eval(), inputs
    if name == "det_10g":
        model: nn.Module = ScrfdDet10g(div)
        inputs: tuple[torch.Tensor, ...] = (torch.rand(1, 3, 640, 640) * 2 - 1,)
    elif name == "w600k_r50":
        model = IResNet50(div=div)
        inputs = (torch.rand(1, 3, 112, 112) * 2 - 1,)
    elif name in ("inswapper_128", "inswapper_128_fp16"):
        model = Inswapper128(width=max(4, 128 // div))
        inputs = (torch.rand(1, 3, 128, 128), F.normalize(torch.randn(1, 512), dim=1))
    elif name == "gfpgan_1.4":
        model = GFPGANv1Clean(GfpganConfig(narrow=1.0 / div))
        inputs = (torch.rand(1, 3, 512, 512) * 2 - 1,)
    elif name in GPEN_CONFIGS:
        size, multiplier, narrow = GPEN_CONFIGS[name]
        model = GpenBfr(size, multiplier, narrow / div)
        inputs = (torch.rand(1, 3, size, size) * 2 - 1,)
    elif name == "codeformer":
        model = CodeFormerReplica(nf=max(32, 64 // div), dim=max(32, 512 // div))
        inputs = (torch.rand(1, 3, 512, 512) * 2 - 1, torch.tensor([0.5], dtype=torch.float64))
    elif name == "2d106det":
        model = Landmark106(width=LANDMARK_WIDTH / div)
        inputs = (torch.rand(1, 3, 192, 192) * 2 - 1,)
    else:
        raise ValueError(f"no replica architecture for {name!r}")
    randomize_bn(model)
    return model.eval(), inputs


def used_parameters(name: str, model: nn.Module) -> int:
    """Parameters that take part in inference (GFPGAN's style MLP and side toRGB convs do not)."""
    total = sum(p.numel() for p in model.parameters())
    if name == "gfpgan_1.4" and hasattr(model, "toRGB"):
        unused = [model.toRGB, model.stylegan_decoder.style_mlp]
        total -= sum(p.numel() for m in unused for p in m.parameters())
    return total

"""GFPGANv1Clean in PyTorch, written for `livecam models convert` (and the benchmark replicas).

Only livecam.models.convert (and scripts/replica_archs.py) import this module: the package never
needs torch at run time. Module and parameter names follow the key names of the released
GFPGANv1.4.pth checkpoint (its `params_ema` state dict) so that it loads with strict=True.

Shape of the network (out_size 512, channel_multiplier 2, sft_half): a U-Net encoder (1x1 conv,
seven bilinear-down ResBlocks, a 3x3 conv), a linear layer that turns the 4x4 bottleneck into one
style vector per decoder layer, seven bilinear-up ResBlocks whose features give per-resolution
SFT scale/shift maps, and a StyleGAN2 decoder (modulated, demodulated convs) in which the SFT maps
modulate half of the channels after each upsampling conv. The noise inputs are the checkpoint's
fixed noise buffers, so an export is deterministic.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Mapping

import torch
from torch import nn
from torch.nn import functional as F

RESOLUTIONS = (4, 8, 16, 32, 64, 128, 256, 512, 1024)


@dataclass(frozen=True)
class GfpganConfig:
    out_size: int = 512
    num_style_feat: int = 512
    num_mlp: int = 8
    channel_multiplier: float = 2
    narrow: float = 1.0
    sft_half: bool = True

    @property
    def log_size(self) -> int:
        return int(math.log2(self.out_size))

    def decoder_channels(self) -> dict[int, int]:
        n, cm = self.narrow, self.channel_multiplier
        base = {4: 512, 8: 512, 16: 512, 32: 512, 64: 256 * cm, 128: 128 * cm, 256: 64 * cm,
                512: 32 * cm, 1024: 16 * cm}
        return {r: int(c * n) for r, c in base.items()}

    def unet_channels(self) -> dict[int, int]:
        # The U-Net runs at half the decoder's width: its SFT maps modulate half the channels.
        return {r: int(c * 0.5) for r, c in self.decoder_channels().items()}


def config_from_state_dict(state: Mapping[str, torch.Tensor]) -> GfpganConfig:
    """The configuration a GFPGANv1Clean state dict was trained with, read off its shapes."""
    downs = {k.split(".")[1] for k in state if k.startswith("conv_body_down.")}
    log_size = len(downs) + 2
    mod = state["stylegan_decoder.style_conv1.modulated_conv.modulation.weight"]
    num_style_feat = int(mod.shape[1])
    num_mlp = len({k.split(".")[2] for k in state if k.startswith("stylegan_decoder.style_mlp.")
                   and k.endswith(".weight")})
    dec4 = int(state["stylegan_decoder.constant_input.weight"].shape[1])
    narrow = dec4 / 512
    first = int(state["conv_body_first.weight"].shape[0])  # unet channels at out_size
    # unet[out_size] = 0.5 * narrow * base[out_size] * cm, base = 32 * 512 / out_size for >= 64.
    base = {64: 256, 128: 128, 256: 64, 512: 32, 1024: 16}[2 ** log_size] if log_size >= 6 else 512
    cm = first / (0.5 * narrow * base) if log_size >= 6 else 2
    sft_half = int(state["condition_scale.0.2.weight"].shape[0]) == int(state["condition_scale.0.0.weight"].shape[0])
    return GfpganConfig(out_size=2 ** log_size, num_style_feat=num_style_feat, num_mlp=num_mlp,
                        channel_multiplier=cm, narrow=narrow, sft_half=sft_half)


class ResBlock(nn.Module):
    """Two 3x3 convs around a bilinear resize, plus a resized 1x1 skip."""

    def __init__(self, cin: int, cout: int, scale: float) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cin, 3, 1, 1)
        self.conv2 = nn.Conv2d(cin, cout, 3, 1, 1)
        self.skip = nn.Conv2d(cin, cout, 1, bias=False)
        self.scale = scale

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = F.leaky_relu(self.conv1(x), 0.2)
        y = F.interpolate(y, scale_factor=self.scale, mode="bilinear", align_corners=False)
        y = F.leaky_relu(self.conv2(y), 0.2)
        x = F.interpolate(x, scale_factor=self.scale, mode="bilinear", align_corners=False)
        return y + self.skip(x)


class ModulatedConv2d(nn.Module):
    """StyleGAN2 conv: per-sample weights scaled by the style, optionally demodulated."""

    def __init__(self, cin: int, cout: int, kernel: int, num_style_feat: int, demodulate: bool = True,
                 upsample: bool = False, eps: float = 1e-8) -> None:
        super().__init__()
        self.cin, self.cout, self.kernel = cin, cout, kernel
        self.demodulate, self.upsample, self.eps = demodulate, upsample, eps
        self.modulation = nn.Linear(num_style_feat, cin, bias=True)
        nn.init.kaiming_normal_(self.modulation.weight, a=0, mode="fan_in", nonlinearity="linear")
        nn.init.constant_(self.modulation.bias, 1.0)
        self.weight = nn.Parameter(torch.randn(1, cout, cin, kernel, kernel) / math.sqrt(cin * kernel * kernel))

    def forward(self, x: torch.Tensor, style: torch.Tensor) -> torch.Tensor:
        b = x.shape[0]
        style = self.modulation(style).view(b, 1, self.cin, 1, 1)
        weight = self.weight * style
        if self.demodulate:
            demod = torch.rsqrt(weight.pow(2).sum([2, 3, 4]) + self.eps)
            weight = weight * demod.view(b, self.cout, 1, 1, 1)
        weight = weight.view(b * self.cout, self.cin, self.kernel, self.kernel)
        if self.upsample:
            x = F.interpolate(x, scale_factor=2, mode="bilinear", align_corners=False)
        h, w = x.shape[2], x.shape[3]
        # Grouped conv: one group per sample, each with its own modulated weights.
        out = F.conv2d(x.reshape(1, b * self.cin, h, w), weight, padding=self.kernel // 2, groups=b)
        return out.view(b, self.cout, h, w)


class StyleConv(nn.Module):
    def __init__(self, cin: int, cout: int, num_style_feat: int, upsample: bool = False) -> None:
        super().__init__()
        self.modulated_conv = ModulatedConv2d(cin, cout, 3, num_style_feat, demodulate=True, upsample=upsample)
        self.weight = nn.Parameter(torch.zeros(1))  # noise strength
        self.bias = nn.Parameter(torch.zeros(1, cout, 1, 1))

    def forward(self, x: torch.Tensor, style: torch.Tensor, noise: torch.Tensor) -> torch.Tensor:
        out = self.modulated_conv(x, style) * math.sqrt(2.0)
        out = out + self.weight * noise + self.bias
        return F.leaky_relu(out, 0.2)


class ToRGB(nn.Module):
    def __init__(self, cin: int, num_style_feat: int, upsample: bool = True) -> None:
        super().__init__()
        self.upsample = upsample
        self.modulated_conv = ModulatedConv2d(cin, 3, 1, num_style_feat, demodulate=False)
        self.bias = nn.Parameter(torch.zeros(1, 3, 1, 1))

    def forward(self, x: torch.Tensor, style: torch.Tensor, skip: torch.Tensor | None = None) -> torch.Tensor:
        out = self.modulated_conv(x, style) + self.bias
        if skip is not None:
            if self.upsample:
                skip = F.interpolate(skip, scale_factor=2, mode="bilinear", align_corners=False)
            out = out + skip
        return out


class ConstantInput(nn.Module):
    def __init__(self, channels: int, size: int = 4) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.randn(1, channels, size, size))

    def forward(self, batch: int) -> torch.Tensor:
        return self.weight.repeat(batch, 1, 1, 1)


class NormStyleCode(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * torch.rsqrt(torch.mean(x ** 2, dim=1, keepdim=True) + 1e-8)


class Noises(nn.Module):
    """Holds the fixed per-layer noise maps as buffers named noise0..noiseN (checkpoint keys)."""

    def __init__(self, num_layers: int) -> None:
        super().__init__()
        for i in range(num_layers):
            res = 2 ** ((i + 5) // 2)
            self.register_buffer(f"noise{i}", torch.randn(1, 1, res, res))

    def get(self, i: int) -> torch.Tensor:
        return getattr(self, f"noise{i}")


class StyleGAN2GeneratorCSFT(nn.Module):
    def __init__(self, cfg: GfpganConfig) -> None:
        super().__init__()
        ch = cfg.decoder_channels()
        s = cfg.num_style_feat
        self.sft_half = cfg.sft_half
        layers: list[nn.Module] = [NormStyleCode()]
        for _ in range(cfg.num_mlp):
            layers += [nn.Linear(s, s, bias=True), nn.LeakyReLU(0.2, True)]
        self.style_mlp = nn.Sequential(*layers)  # unused: GFPGAN feeds latents directly
        self.constant_input = ConstantInput(ch[4])
        self.style_conv1 = StyleConv(ch[4], ch[4], s)
        self.to_rgb1 = ToRGB(ch[4], s, upsample=False)
        self.num_layers = (cfg.log_size - 2) * 2 + 1
        self.num_latent = cfg.log_size * 2 - 2
        self.style_convs = nn.ModuleList()
        self.to_rgbs = nn.ModuleList()
        self.noises = Noises(self.num_layers)
        cin = ch[4]
        for i in range(3, cfg.log_size + 1):
            cout = ch[2 ** i]
            self.style_convs.append(StyleConv(cin, cout, s, upsample=True))
            self.style_convs.append(StyleConv(cout, cout, s))
            self.to_rgbs.append(ToRGB(cout, s, upsample=True))
            cin = cout

    def forward(self, latent: torch.Tensor, conditions: list[torch.Tensor]) -> torch.Tensor:
        out = self.constant_input(latent.shape[0])
        out = self.style_conv1(out, latent[:, 0], self.noises.get(0))
        skip = self.to_rgb1(out, latent[:, 1])
        i = 1
        for j, to_rgb in enumerate(self.to_rgbs):
            out = self.style_convs[2 * j](out, latent[:, i], self.noises.get(2 * j + 1))
            if i < len(conditions):
                if self.sft_half:
                    half = out.shape[1] // 2
                    same, sft = out[:, :half], out[:, half:]
                    out = torch.cat([same, sft * conditions[i - 1] + conditions[i]], dim=1)
                else:
                    out = out * conditions[i - 1] + conditions[i]
            out = self.style_convs[2 * j + 1](out, latent[:, i + 1], self.noises.get(2 * j + 2))
            skip = to_rgb(out, latent[:, i + 2], skip)
            i += 2
        return skip


class GFPGANv1Clean(nn.Module):
    """Input: RGB in [-1, 1], [N, 3, out_size, out_size]; output: the restored face, same range."""

    def __init__(self, cfg: GfpganConfig = GfpganConfig()) -> None:
        super().__init__()
        self.cfg = cfg
        log_size = cfg.log_size
        unet = cfg.unet_channels()
        dec = cfg.decoder_channels()
        self.conv_body_first = nn.Conv2d(3, unet[cfg.out_size], 1)
        cin = unet[cfg.out_size]
        self.conv_body_down = nn.ModuleList()
        for i in range(log_size, 2, -1):
            cout = unet[2 ** (i - 1)]
            self.conv_body_down.append(ResBlock(cin, cout, 0.5))
            cin = cout
        self.final_conv = nn.Conv2d(cin, unet[4], 3, 1, 1)
        cin = unet[4]
        self.conv_body_up = nn.ModuleList()
        for i in range(3, log_size + 1):
            cout = unet[2 ** i]
            self.conv_body_up.append(ResBlock(cin, cout, 2.0))
            cin = cout
        self.toRGB = nn.ModuleList([nn.Conv2d(unet[2 ** i], 3, 1) for i in range(3, log_size + 1)])  # unused
        self.num_latent = log_size * 2 - 2
        self.final_linear = nn.Linear(unet[4] * 4 * 4, self.num_latent * cfg.num_style_feat)
        self.stylegan_decoder = StyleGAN2GeneratorCSFT(cfg)
        self.condition_scale = nn.ModuleList()
        self.condition_shift = nn.ModuleList()
        for i in range(3, log_size + 1):
            c = unet[2 ** i]
            sft_out = c if cfg.sft_half else c * 2
            assert sft_out == (dec[2 ** i] // 2 if cfg.sft_half else dec[2 ** i]), "SFT width mismatch"
            for bank in (self.condition_scale, self.condition_shift):
                bank.append(nn.Sequential(nn.Conv2d(c, c, 3, 1, 1), nn.LeakyReLU(0.2, True),
                                          nn.Conv2d(c, sft_out, 3, 1, 1)))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        feat = F.leaky_relu(self.conv_body_first(x), 0.2)
        skips: list[torch.Tensor] = []
        for block in self.conv_body_down:
            feat = block(feat)
            skips.insert(0, feat)
        feat = F.leaky_relu(self.final_conv(feat), 0.2)
        latent = self.final_linear(feat.flatten(1)).view(x.shape[0], self.num_latent, -1)
        conditions: list[torch.Tensor] = []
        for i, block in enumerate(self.conv_body_up):
            feat = block(feat + skips[i])
            conditions.append(self.condition_scale[i](feat))
            conditions.append(self.condition_shift[i](feat))
        return self.stylegan_decoder(latent, conditions)

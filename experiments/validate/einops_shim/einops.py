"""A stand-in for einops.rearrange on machines without einops (Debian has no package; the lent GPU machine has no
internet), for the two patterns ComfyUI's comfy/ldm/wan/vae.py uses. einops does the same as these: a permute of the
tensor's dims then a reshape (a copy where the permuted tensor is not contiguous), so the same kernels run."""
import re


def rearrange(x, pattern, **sizes):
    p = re.sub(r"\s+", " ", pattern.replace("->", " -> ")).strip()
    if p == "b c t h w -> (b t) c h w":
        b, c, t, h, w = x.shape
        return x.permute(0, 2, 1, 3, 4).reshape(b * t, c, h, w)
    if p == "(b t) c h w -> b c t h w":
        t = sizes["t"]
        bt, c, h, w = x.shape
        return x.reshape(bt // t, t, c, h, w).permute(0, 2, 1, 3, 4)
    raise NotImplementedError(f"einops shim: pattern {pattern!r}")


def repeat(x, pattern, **sizes):
    """Imported by comfy/ldm/modules/attention.py and diffusionmodules/util.py; the paths these harnesses run never
    call it."""
    raise NotImplementedError(f"einops shim: repeat {pattern!r}")

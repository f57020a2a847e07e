"""ComfyUI's own partial-loading code (lowvram), run on tiersim's models, as fixtures for tiersim's comfyui rule.

ComfyUI is not a dependency: give this script directories holding files extracted from a ComfyUI commit (not
committed here; see results/frameworks/comfyui/README.md for the commits and the extraction command). Files read:
comfy/cli_args.py, comfy/options.py, comfy/model_management.py, comfy/model_patcher.py, comfy/patcher_extension.py
(run unchanged, as the modules they are), comfy/ops.py (its CastWeightBiasOp class) and comfy/utils.py (its get_attr
function), both taken out with `ast`, unchanged. Only torch, psutil and the comfy modules these import that play no
part in loading (hooks, lora, float, quant_ops, memory_management, comfy_aimdo, ...) are stubs. The fake torch
reports the case's hardware: torch.cuda.mem_get_info = (free, total) VRAM, no memory held by the caching allocator,
psutil total RAM, torch.version.cuda (NVIDIA) or .hip (AMD); cudaHostRegister always succeeds (so pinning is limited
only by ComfyUI's own MAX_PINNED_MEMORY budget). platform.win32_ver is faked for Windows cases.

Each case calls comfy.model_management.load_models_gpu([patcher], memory_required, minimum_memory_required) on a
fresh ModelPatcher (nothing else loaded), exactly as ComfyUI does before running a model. The model is a module tree
built from the dotted names of a tiersim trace (`sim gen`, same as distorch_allocations.py): one leaf per weight
tensor, of kind Linear / Embedding / RMSNorm (comfy.ops classes: CastWeightBiasOp mixin, bias=None, bf16 weight of the
trace's byte size), in the trace's order; intermediate modules (model, model.layers, model.layers.0, ...) have no
parameters of their own, as in the real model. That is the list ComfyUI's ModelPatcher._load_list sees for an LLM
built from comfy ops (ComfyUI's own text encoders usually omit lm_head; tiersim's models keep it).

Assumptions, recorded per case under "inputs": free VRAM = card size - 512 MiB (CUDA context, display); memory_required
= 0 and minimum_memory_required = None, as CLIP.load_model passes for a text encoder without a
memory_estimation_function (comfy/sd.py), unless the case says otherwise (the "sampler" cases pass both, as
comfy/sampler_helpers.py does for a diffusion model); 64 GiB RAM unless stated.

  /usr/bin/python3 experiments/frameworks/comfyui_partial_loads.py OUT.jsonl LABEL=DIR [LABEL=DIR ...]
  (LABEL: "v0.19.3@<commit>" style name written to each line; the first DIR gets all cases, later DIRs the
  Linux/Windows card cases only)

Output: one JSON line per case, keys:
  comfyui            LABEL of the source directory used
  model, case        tiersim model name; case name (platform-card[-variant])
  inputs             {platform: linux|windows, vendor: nvidia|amd, vram_total, vram_free, ram_total (bytes),
                      memory_required, minimum_memory_required (bytes or null), args: {cli flag: value}}
  constants          as ComfyUI computed them: extra_reserved_vram, minimum_inference_memory, min_weight_memory_ratio,
                     num_streams (offload streams; 1 = none in mid-2025 code), max_pinned_memory (-1 = no pinning),
                     vram_state
  lowvram_model_memory  the budget load_models_gpu passed to LoadedModel.model_load (bytes, a float as ComfyUI has
                     it; 0 means "no limit" = full load; 0.1 means offload everything)
  load_budget        lowvram_model_memory that ModelPatcher.load received (1e32 when model_load turned 0 into
                     "use everything"), full_load: the full_load flag partially_load passed to load()
  model_size, loaded_bytes (model_loaded_weight_memory), offloaded_bytes (model_size - loaded_bytes),
  offload_buffer     model_offload_buffer_memory (VRAM reserved for in-flight casts; null where the code has none)
  pinned_bytes       TOTAL_PINNED_MEMORY after the load (bytes of offloaded weights cudaHostRegister'ed; null where
                     the code has no pinning)
  model_lowvram      ModelPatcher set model.model_lowvram (True = partially loaded)
  modules            [name, kind, bytes, on_gpu, cast, pinned] per leaf in registration order; on_gpu: 1 if the
                     weight was moved to the GPU; cast: comfy_cast_weights after the load (1 = offloaded, cast per
                     forward); pinned: 1 if the weight is pinned
  load_order         indices into modules, in the order ModelPatcher.load considered them (its sorted _load_list)
"""
import ast
import importlib.util
import json
import logging
import os
import platform
import sys
import types

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from distorch_allocations import leaf_kind, tensors_of  # noqa: E402  (tiersim's weights, in its order)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SIM = os.environ.get("TIERSIM_SIM", os.path.join(ROOT, "build", "bin", "sim"))
GIB = 1 << 30
MIB = 1 << 20
MODELS = ["qwen3-8b", "qwen3-14b", "llama-3.1-8b"]


def card(platform_, gib, vendor="nvidia", ram=64 * GIB, args=None, memory_required=0, minimum=None):
    return {"platform": platform_, "vendor": vendor, "vram_total": gib * GIB, "vram_free": gib * GIB - 512 * MIB,
            "ram_total": ram, "memory_required": memory_required, "minimum_memory_required": minimum,
            "args": args or {}}


BASE_CASES = [  # every source directory
    ("linux-24g", card("linux", 24)),
    ("linux-16g", card("linux", 16)),
    ("linux-12g", card("linux", 12)),
    ("linux-8g", card("linux", 8)),
    ("windows-16g-ram32g", card("windows", 16, ram=32 * GIB)),
    ("windows-8g-ram32g", card("windows", 8, ram=32 * GIB)),
]
EXTRA_CASES = [  # the first (current) source directory only
    ("linux-12g-reserve2", card("linux", 12, args={"reserve_vram": 2.0})),
    ("linux-12g-no-async-offload", card("linux", 12, args={"disable_async_offload": True})),
    ("linux-12g-no-pinned-memory", card("linux", 12, args={"disable_pinned_memory": True})),
    ("linux-8g-ram16g", card("linux", 8, ram=16 * GIB)),
    ("linux-12g-novram", card("linux", 12, args={"novram": True})),
    ("linux-16g-sampler", card("linux", 16, memory_required=6 * GIB, minimum=3 * GIB)),
    ("linux-24g-amd-sampler", card("linux", 24, vendor="amd", memory_required=16 * GIB, minimum=14 * GIB)),
]


# ---------------------------------------------------------------------------------------------- fake torch
class Anything:
    """Permissive stand-in for torch parts that play no role in loading (cudnn flags, sdp toggles, ...)."""

    def __init__(self, name="?"):
        self._name = name

    def __getattr__(self, k):
        if k.startswith("__"):
            raise AttributeError(k)
        return Anything(self._name + "." + k)

    def __call__(self, *a, **k):
        return Anything(self._name + "()")

    def __bool__(self):
        return False

    def __iter__(self):
        return iter(())


class PermissiveModule(types.ModuleType):
    def __getattr__(self, k):
        if k.startswith("__"):
            raise AttributeError(k)
        return Anything(self.__name__ + "." + k)


class DType:
    def __init__(self, name, itemsize):
        self.name, self.itemsize = name, itemsize

    def __repr__(self):
        return "torch." + self.name


class Device:
    def __init__(self, type_, index=None):
        if isinstance(type_, Device):
            type_, index = type_.type, type_.index
        elif isinstance(type_, int):
            type_, index = "cuda", type_
        elif ":" in type_:
            type_, i = type_.split(":")
            index = int(i)
        self.type, self.index = type_, index

    def __eq__(self, o):
        return isinstance(o, Device) and (self.type, self.index) == (o.type, o.index)

    def __hash__(self):
        return hash((self.type, self.index))

    def __repr__(self):
        return "device(%s%s)" % (self.type, "" if self.index is None else ":%d" % self.index)


class Tensor:
    _next_ptr = [4096]

    def __init__(self, nbytes, dtype, device):
        self.nbytes, self.dtype, self.device = nbytes, dtype, device
        self.shape = (nbytes // dtype.itemsize,)
        self.ptr = Tensor._next_ptr[0]
        Tensor._next_ptr[0] += nbytes + 4096
        self.pinned = False
        self.is_meta = False

    def numel(self):
        return self.nbytes // self.dtype.itemsize

    nelement = numel

    def element_size(self):
        return self.dtype.itemsize

    def is_pinned(self):
        return self.pinned

    def is_contiguous(self):
        return True

    def data_ptr(self):
        return self.ptr

    def untyped_storage(self):
        return types.SimpleNamespace()

    def to(self, *a, **k):
        raise RuntimeError("weight copy not expected in this harness (no patches)")


class Parameter(Tensor):  # type(t).__name__ == "Parameter": ComfyUI pins only Tensor/Parameter/QuantizedTensor
    pass


def make_torch(hw):
    torch = PermissiveModule("torch")
    for name, size in [("float16", 2), ("bfloat16", 2), ("float32", 4), ("float64", 8), ("int8", 1), ("uint8", 1),
                       ("float8_e4m3fn", 1), ("float8_e4m3fnuz", 1), ("float8_e5m2", 1), ("float8_e5m2fnuz", 1),
                       ("float8_e8m0fnu", 1)]:
        setattr(torch, name, DType(name, size))
    torch.device = Device
    torch.Tensor = Tensor
    torch.version = types.SimpleNamespace(__version__="2.9.1+cu128" if hw["vendor"] == "nvidia" else "2.9.1+rocm6.4",
                                          cuda="12.8" if hw["vendor"] == "nvidia" else None,
                                          hip="6.4" if hw["vendor"] == "amd" else None)
    registered = {}

    def cuda_host_register(ptr, size, flags):
        registered[ptr] = size
        return 0

    cuda = PermissiveModule("torch.cuda")
    cuda.is_available = lambda: True
    cuda.current_device = lambda: 0
    cuda.device_count = lambda: 1
    cuda.mem_get_info = lambda dev=None: (hw["vram_free"], hw["vram_total"])
    cuda.memory_stats = lambda dev=None: {"reserved_bytes.all.current": 0, "active_bytes.all.current": 0}
    cuda.get_device_properties = lambda dev=None: types.SimpleNamespace(
        major=8, minor=9, name="NVIDIA GeForce RTX 4090" if hw["vendor"] == "nvidia" else "AMD Radeon RX 7900 XTX",
        gcnArchName="gfx1100", total_memory=hw["vram_total"])
    cuda.get_device_name = lambda dev=None: cuda.get_device_properties().name
    cuda.get_allocator_backend = lambda: "cudaMallocAsync"
    cuda.is_bf16_supported = lambda: True
    cuda.synchronize = lambda *a: None
    cuda.empty_cache = lambda: None
    cuda.ipc_collect = lambda: None
    cuda.OutOfMemoryError = type("OutOfMemoryError", (RuntimeError,), {})
    cuda.cudart = lambda: types.SimpleNamespace(cudaHostRegister=cuda_host_register,
                                                cudaHostUnregister=lambda ptr: registered.pop(ptr, None) and 0)
    torch.cuda = cuda

    def no_xpu():
        raise RuntimeError("no xpu")

    torch.xpu = types.SimpleNamespace(device_count=no_xpu, is_available=lambda: False)
    torch.backends = types.SimpleNamespace(mps=types.SimpleNamespace(is_available=lambda: False),
                                           cuda=Anything("torch.backends.cuda"), cudnn=Anything("torch.backends.cudnn"))
    torch.compiler = types.SimpleNamespace(is_compiling=lambda: False)
    nn = types.ModuleType("torch.nn")
    nn.Parameter = Parameter
    nn.Module = object
    torch.nn = nn
    torch.registered = registered
    return torch


# ---------------------------------------------------------------------------------------------- the model
class Module:
    def __init__(self):
        self._children = {}
        self._params = {}

    def add(self, name, child):
        self._children[name] = child
        setattr(self, name, child)

    def named_modules(self, prefix=""):
        yield prefix, self
        for n, c in self._children.items():
            yield from c.named_modules(prefix + "." + n if prefix else n)

    def modules(self):
        for _, m in self.named_modules():
            yield m

    def named_parameters(self, recurse=True, prefix=""):
        for n, p in self._params.items():
            yield (prefix + "." + n if prefix else n), p
        if recurse:
            for cn, c in self._children.items():
                yield from c.named_parameters(True, prefix + "." + cn if prefix else cn)

    def named_buffers(self, recurse=True):
        return iter(())

    def state_dict(self):
        return dict(self.named_parameters())

    def to(self, device=None, *a, **k):
        for _, p in self.named_parameters():
            p.device = Device(device)
        return self


def build_model(weights, torch, cast_op):
    kinds = {k: type(k, (Module, cast_op), {}) for k in ("Linear", "Embedding", "RMSNorm")}
    root = Module()
    leaves = []
    for name, nbytes in weights:
        parent = root
        parts = name.split(".")
        for p in parts[:-1]:
            if p not in parent._children:
                parent.add(p, Module())
            parent = parent._children[p]
        leaf = kinds[leaf_kind(name)]()
        leaf.weight = Parameter(nbytes, torch.bfloat16, Device("cpu"))
        leaf.bias = None
        leaf._params["weight"] = leaf.weight
        parent.add(parts[-1], leaf)
        leaves.append((name, leaf))
    return root, leaves


# ---------------------------------------------------------------------------------------------- loading ComfyUI
def extract(path, names):
    """Source of the named top-level functions/classes of a file, unchanged."""
    src = open(path).read()
    tree = ast.parse(src)
    out = [ast.get_source_segment(src, n) for n in tree.body
           if isinstance(n, (ast.FunctionDef, ast.ClassDef)) and n.name in names]
    if len(out) != len(names):
        raise RuntimeError("missing %s in %s" % (names, path))
    return "\n\n".join(out)


def load_module(name, path):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


def stub(name, **attrs):
    mod = PermissiveModule(name)
    for k, v in attrs.items():
        setattr(mod, k, v)
    sys.modules[name] = mod
    return mod


def load_comfy(src, hw):
    """Fresh comfy.model_management and comfy.model_patcher for one case (their module-level constants depend
    on the platform, the GPU and the command line)."""
    for k in [k for k in sys.modules if k == "comfy" or k.startswith(("comfy.", "comfy_aimdo", "torch", "psutil"))]:
        del sys.modules[k]
    torch = make_torch(hw)
    sys.modules["torch"] = torch
    sys.modules["torch.nn"] = torch.nn
    stub("psutil", virtual_memory=lambda: types.SimpleNamespace(total=hw["ram_total"], available=hw["ram_total"]))
    comfy = types.ModuleType("comfy")
    comfy.__path__ = [os.path.join(src, "comfy")]
    sys.modules["comfy"] = comfy
    comfy.options = load_module("comfy.options", os.path.join(src, "comfy", "options.py"))
    comfy.cli_args = load_module("comfy.cli_args", os.path.join(src, "comfy", "cli_args.py"))  # args: defaults
    for k, v in hw["args"].items():
        setattr(comfy.cli_args.args, k, v)
    ns = {}
    exec(extract(os.path.join(src, "comfy", "utils.py"), ["get_attr"]), ns)
    comfy.utils = stub("comfy.utils", get_attr=ns["get_attr"])
    quant = stub("comfy.quant_ops", QuantizedTensor=type("QuantizedTensor", (), {}))
    comfy.quant_ops = quant
    comfy.memory_management = stub("comfy.memory_management", aimdo_enabled=False)
    comfy.windows = stub("comfy.windows", get_free_ram=lambda: hw["ram_total"])
    comfy.system_memory = stub("comfy.system_memory", virtual_memory_total=lambda: hw["ram_total"],
                               virtual_memory_available=lambda: hw["ram_total"], cgroup_memory_limit=lambda: None)
    for name in ("comfy.float", "comfy.lora", "comfy.comfy_types", "comfy.pinned_memory", "comfy.internal_logging",
                 "comfy_aimdo", "comfy_aimdo.model_vbar", "comfy_aimdo.host_buffer", "comfy_aimdo.vram_buffer",
                 "comfy_aimdo.torch", "comfy.configurable"):
        setattr(comfy, name.split(".")[-1], stub(name))
    comfy.hooks = stub("comfy.hooks", EnumHookMode=types.SimpleNamespace(MaxSpeed="MaxSpeed", MinVram="MinVram"),
                       create_transformer_options_from_hooks=lambda *a, **k: None)
    comfy.patcher_extension = load_module("comfy.patcher_extension", os.path.join(src, "comfy", "patcher_extension.py"))
    real_win32_ver = platform.win32_ver
    if hw["platform"] == "windows":
        platform.win32_ver = lambda *a: ("10", "10.0.19045", "SP0", "Multiprocessor Free")
    try:
        comfy.model_management = load_module("comfy.model_management", os.path.join(src, "comfy", "model_management.py"))
    finally:
        platform.win32_ver = real_win32_ver
    comfy.model_patcher = load_module("comfy.model_patcher", os.path.join(src, "comfy", "model_patcher.py"))
    ns = {}
    exec(extract(os.path.join(src, "comfy", "ops.py"), ["CastWeightBiasOp"]), ns)
    return torch, comfy.model_management, comfy.model_patcher, ns["CastWeightBiasOp"]


def run_case(src, label, model, weights, case, hw):
    torch, mm, mp, cast_op = load_comfy(src, hw)
    root, leaves = build_model(weights, torch, cast_op)
    gpu = torch.device(torch.cuda.current_device())
    patcher = mp.ModelPatcher(root, load_device=gpu, offload_device=torch.device("cpu"))
    seen = {}
    real_load, real_load_list = mp.ModelPatcher.load, mp.ModelPatcher._load_list

    def load(self, device_to=None, lowvram_model_memory=0, force_patch_weights=False, full_load=False, **kw):
        seen["load_budget"], seen["full_load"] = lowvram_model_memory, full_load
        return real_load(self, device_to, lowvram_model_memory, force_patch_weights, full_load, **kw)

    def load_list(self, *a, **k):
        lst = real_load_list(self, *a, **k)
        seen["order"] = [x[-3] for x in sorted(lst, reverse=True)]  # load() sorts it this way; x[-3] is the name
        return lst

    real_model_load = mm.LoadedModel.model_load

    def model_load(self, lowvram_model_memory=0, force_patch_weights=False):
        seen["lowvram_model_memory"] = lowvram_model_memory
        return real_model_load(self, lowvram_model_memory, force_patch_weights)

    mp.ModelPatcher.load, mp.ModelPatcher._load_list, mm.LoadedModel.model_load = load, load_list, model_load
    mm.load_models_gpu([patcher], memory_required=hw["memory_required"],
                       minimum_memory_required=hw["minimum_memory_required"])
    index = {n: i for i, (n, _) in enumerate(leaves)}
    modules = []
    for name, m in leaves:
        modules.append([name, type(m).__name__, m.weight.nbytes, int(m.weight.device.type == "cuda"),
                        int(bool(m.comfy_cast_weights)), int(name + ".weight" in getattr(patcher, "pinned", ()))])
    size = patcher.model_size()
    loaded = root.model_loaded_weight_memory
    return {
        "comfyui": label, "model": model, "case": case, "inputs": hw,
        "constants": {"extra_reserved_vram": mm.extra_reserved_memory(),
                      "minimum_inference_memory": mm.minimum_inference_memory(),
                      "min_weight_memory_ratio": mm.MIN_WEIGHT_MEMORY_RATIO, "num_streams": mm.NUM_STREAMS,
                      "max_pinned_memory": getattr(mm, "MAX_PINNED_MEMORY", None), "vram_state": mm.vram_state.name},
        "lowvram_model_memory": seen["lowvram_model_memory"], "load_budget": seen["load_budget"],
        "full_load": seen["full_load"], "model_size": size, "loaded_bytes": loaded, "offloaded_bytes": size - loaded,
        "offload_buffer": getattr(root, "model_offload_buffer_memory", None),
        "pinned_bytes": getattr(mm, "TOTAL_PINNED_MEMORY", None), "model_lowvram": root.model_lowvram,
        "modules": modules, "load_order": [index[n] for n in seen["order"]],
    }


def main(out_path, sources):
    logging.disable(logging.CRITICAL)
    rows = []
    for si, arg in enumerate(sources):
        label, src = arg.split("=", 1)
        cases = BASE_CASES + (EXTRA_CASES if si == 0 else [])
        for model in MODELS:
            weights = tensors_of(model)
            for case, hw in cases:
                rows.append(run_case(src, label, model, weights, case, hw))
    with open(out_path, "w") as f:
        for r in rows:
            f.write(json.dumps(r, sort_keys=True, separators=(",", ":")) + "\n")
    print("%d cases" % len(rows))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2:])

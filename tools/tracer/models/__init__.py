"""Model registry: every model the zoo holds, by name."""
from .spec import ModelSpec  # noqa: F401
from .vision import vision_specs, vit_spec, vit_sdpa_spec
from .transformers import transformer_specs
from .dlrm import dlrm_specs
from .unet3d import unet3d_specs

REGISTRY = {}
for _s in vision_specs() + transformer_specs() + [vit_spec(), vit_sdpa_spec()] + dlrm_specs() + unet3d_specs():
    REGISTRY[_s.name] = _s


def get(name):
    try:
        return REGISTRY[name]
    except KeyError:
        raise KeyError(f"unknown model {name!r}; known: {', '.join(sorted(REGISTRY))}")

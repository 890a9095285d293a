"""The zoo model a script trains, from the torchvision builder it calls.

`gpemu predict` multiplies a zoo model's per-phase times by the correction
learned for it (docs/torch.md, "--model"). A script that builds a torchvision
model of a zoo name (`torchvision.models.resnet50(...)`, `get_model("resnet50")`)
trains that model: from then on its correction applies (Runtime::set_model),
as `gpemu torch --model` applies it for the whole run; a builder of a model
the zoo does not have applies none. `--model` given: it holds, builders change
nothing. torchvision is not imported for this: its builders are wrapped when
the script imports torchvision.models.
"""
import functools
import importlib.abc
import importlib.util
import inspect
import sys

_ops = None
_NOT_BUILDERS = {"get_model", "get_model_builder", "get_model_weights", "get_weight", "list_models"}


def _wrap(module):
    def note(name, builder):
        @functools.wraps(builder)
        def build(*args, **kwargs):
            model = builder(*args, **kwargs)
            _ops.set_model(name)
            return model
        return build

    for name in dir(module):
        builder = getattr(module, name)
        if not name.startswith("_") and name.islower() and name not in _NOT_BUILDERS and inspect.isfunction(builder):
            setattr(module, name, note(name, builder))
    if inspect.isfunction(getattr(module, "get_model", None)):
        get_model = module.get_model

        @functools.wraps(get_model)
        def get_model_noted(name, **config):
            model = get_model(name, **config)
            _ops.set_model(name.lower())
            return model

        module.get_model = get_model_noted


class _Finder(importlib.abc.MetaPathFinder):
    """Wraps torchvision.models' builders once the script imports it."""

    def find_spec(self, fullname, path, target=None):
        if fullname != "torchvision.models":
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(fullname)
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        exec_module = spec.loader.exec_module

        def exec_and_wrap(module):
            exec_module(module)
            _wrap(module)

        spec.loader.exec_module = exec_and_wrap
        return spec


def patch(torch):
    global _ops
    _ops = torch.ops.gpemu
    if "torchvision.models" in sys.modules:
        _wrap(sys.modules["torchvision.models"])
    else:
        sys.meta_path.insert(0, _Finder())

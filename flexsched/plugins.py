"""Target kinds and what plugs into them: each kind's evaluators, back end and named devices."""

# The module that owns a kind registers them (codegen for cpu and gpu, fpga_model for fpga), so the
# layers that use them never import it: explore/ asks here for an evaluator, codegen for a back end,
# flexsched.target for an FPGA part. OWNERS names the module that registers each kind; it is imported
# on the first question about that kind. A new target kind is one line in OWNERS and a module that
# calls the register_* functions.

from __future__ import annotations

import importlib

from .errors import FlexschedError

# kind -> the module whose import registers the kind's evaluators, back end and devices
OWNERS = {"cpu": "codegen.targets", "gpu": "codegen.targets", "fpga": "fpga_model.targets"}


class PluginError(FlexschedError, LookupError):
    """An unknown target kind, or nothing of the asked name registered for a kind."""


_evaluators = {}   # kind -> {name: factory(target, **options) -> flexsched.evaluation.Evaluator}
_defaults = {}     # kind -> the evaluator name used when none is asked for
_backends = {}     # kind -> a back end object, or the module whose import registers it
_devices = {}      # kind -> ({device name: Target fields}, default device name)
_featurizers = {}  # kind -> features(task, schedule, target, info=None) -> a candidate's features for cost models
_loaded = set()    # kinds whose owner has been imported


def register_evaluator(kind, name, factory, default=False):
    """Make factory(target, **options) the evaluator called name for targets of kind."""
    _evaluators.setdefault(kind, {})[name] = factory
    if default or kind not in _defaults:
        _defaults[kind] = name


def register_backend(kind, backend):
    """The back end of kind: an object, or the module whose import registers one (never replacing an object)."""
    if isinstance(backend, str) and kind in _backends and not isinstance(_backends[kind], str):
        return
    _backends[kind] = backend


def register_featurizer(kind, features):
    """Make features(task, schedule, target, info=None) what learned cost models read of a candidate of kind."""
    _featurizers[kind] = features


def featurizer(kind):
    """The features function of a target kind (of a Target), for learned cost models."""
    kind = getattr(kind, "kind", kind)
    _load(kind)
    if kind not in _featurizers:
        raise PluginError(f"no candidate features for target kind '{kind}'; learned cost models need a loop IR, "
                          f"which kinds {', '.join(sorted(_featurizers)) or 'none'} have")
    return _featurizers[kind]


def register_devices(kind, devices, default):
    """The named devices of kind ({name: Target fields}) and the one a bare target name means."""
    _devices[kind] = (dict(devices), default)


def _load(kind):
    """Import the module that registers kind, once."""
    if kind in _loaded or kind not in OWNERS:
        return
    _loaded.add(kind)
    try:
        importlib.import_module(OWNERS[kind])
    except ImportError as err:
        _loaded.discard(kind)
        raise PluginError(f"target kind '{kind}': its module {OWNERS[kind]} cannot be imported ({err})") from None


def _load_all():
    for kind in OWNERS:
        _load(kind)


def kinds():
    """Every target kind something is registered for (or will be, on first use)."""
    return tuple(sorted(set(OWNERS) | set(_evaluators) | set(_backends) | set(_devices)))


def evaluator_names(kind):
    """The evaluator names registered for kind, the default first."""
    _load(kind)
    names = list(_evaluators.get(kind, {}))
    if kind in _defaults:
        names.remove(_defaults[kind])
        names.insert(0, _defaults[kind])
    return tuple(names)


def make_evaluator(target, name=None, **options):
    """A new evaluator for target (a flexsched.target.Target): the one called name, else its kind's default."""
    kind = target.kind
    names = evaluator_names(kind)
    if not names:
        _load_all()
        raise PluginError(f"no evaluator for target '{target.name}' (kind '{kind}'); evaluators exist for kinds: "
                          + ", ".join(sorted(_evaluators)))
    name = names[0] if name is None else name
    if name not in names:
        raise PluginError(f"unknown evaluator '{name}' for {kind} targets; choose one of {', '.join(names)}")
    return _evaluators[kind][name](target, **options)


def backend(kind):
    """The back end registered for a target kind (a Target or its kind), importing its module on first use."""
    kind = getattr(kind, "kind", kind)
    _load(kind)
    found = _backends.get(kind)
    if isinstance(found, str):
        try:
            importlib.import_module(found)
        except ImportError as err:
            raise PluginError(f"the {kind} back end ({found}) cannot be imported: {err}") from None
        found = _backends.get(kind)
    if found is None or isinstance(found, str):
        _load_all()
        raise PluginError(f"no back end for target kind '{kind}'; back ends exist for: {', '.join(sorted(_backends))}")
    return found


def has_backend(kind):
    """Whether a back end builds kernels for the kind (of a Target), without importing the back end."""
    kind = getattr(kind, "kind", kind)
    _load(kind)
    return kind in _backends


def loaded_backends():
    """The back end objects registered so far in this process."""
    return tuple(found for found in _backends.values() if not isinstance(found, str))


def devices(kind):
    """({device name: Target fields}, default device name) registered for kind."""
    _load(kind)
    if kind not in _devices:
        raise PluginError(f"no devices registered for target kind '{kind}'")
    found, default = _devices[kind]
    return dict(found), default

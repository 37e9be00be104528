"""The ``tcgd`` torch.compile backend: Inductor (CUDA Graph Trees when the mode asks for
them) with the probe insertion pass installed, every other option passed through."""

from __future__ import annotations

import contextlib
import contextvars
import functools
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import torch

import torch_cudagraph_debug.compile._progress as _progress
from torch_cudagraph_debug.compile.session import ProbeSession, load_config, session_for_compile
from torch_cudagraph_debug.errors import ConfigError, InvalidInputError
from torch_cudagraph_debug.fx_passes.probe_insertion import ChainedPass, graph_kind

# Set by explain() and differential(): compile into that session rather than the
# process's session for the config.
_SESSION_OVERRIDE: contextvars.ContextVar[Any] = contextvars.ContextVar(
    "tcgd_session_override", default=None
)

# Options the backend takes for itself; everything else is an Inductor option.
OUR_OPTIONS = ("probes", "run_dir", "run_name", "payload", "overwrite", "mode")

# The session each backend options object compiles into, by the object's identity: the
# options of one torch.compile call reach the backend as the same object for every graph
# (recompilations included), so a model keeps its session for its lifetime, even once it
# is finished. The objects are held, so their ids cannot be reused.
_BOUND: dict[int, tuple[object, ProbeSession]] = {}
_BOUND_LOCK = threading.Lock()


def _kind_aware_inner_compile(gm: torch.fx.GraphModule, example_inputs: Sequence[Any], **kwargs):
    """Inductor's inner compile, told which kind of graph it compiles so the pass can select
    by graph kind (and name sites by it)."""
    from torch._inductor.compile_fx import compile_fx_inner

    if kwargs.get("is_backward"):
        kind = "backward"
    elif kwargs.get("is_inference"):
        kind = "inference"
    else:
        kind = "forward"
    with graph_kind(kind):
        return compile_fx_inner(gm, example_inputs, **kwargs)


def inductor_patches(mode: str | None, options: dict[str, Any], probe_pass: Any) -> dict[str, Any]:
    """Inductor config for one compilation: the mode's options, the user's options, and
    our pass chained after any custom post-grad pass already configured."""
    import torch._inductor.config as inductor_config

    patches: dict[str, Any] = {}
    if mode is not None and mode != "default":
        patches.update(torch._inductor.list_mode_options(mode))
    patches.update(options)
    existing = patches.get("post_grad_custom_post_pass", inductor_config.post_grad_custom_post_pass)
    patches["post_grad_custom_post_pass"] = (
        probe_pass if existing is None else ChainedPass(existing, probe_pass)
    )
    return patches


# Every cache that can hand a compilation an artifact built earlier, in this process or
# another: Inductor's FX graph cache and AOTAutograd's cache, local, remote and bundled.
# Names a torch release lacks are skipped.
_INDUCTOR_CACHES = ("fx_graph_cache", "fx_graph_remote_cache")
_AOT_AUTOGRAD_CACHES = (
    "enable_autograd_cache",
    "enable_remote_autograd_cache",
    "bundled_autograd_cache",
)


@contextlib.contextmanager
def no_compile_caches() -> Iterator[None]:
    """Compiles inside the block neither read nor write a compile cache.

    The differential reference needs this: its graphs go through Inductor's front half
    with the same config as the compiled side, so the caches' keys cannot tell the two
    apart, and a warm cache would serve the reference the compiled artifact (a reference
    equal to the compiled model, hiding every divergence). ``explain`` needs it so the
    pass runs on every graph."""
    import torch._functorch.config as functorch_config
    import torch._inductor.config as inductor_config

    inductor = {k: False for k in _INDUCTOR_CACHES if hasattr(inductor_config, k)}
    functorch = {k: False for k in _AOT_AUTOGRAD_CACHES if hasattr(functorch_config, k)}
    with inductor_config.patch(inductor), functorch_config.patch(functorch):
        yield


def session_for_options(options: dict[str, Any]) -> ProbeSession:
    """The session a ``backend="tcgd"`` options object records into (bound at its first
    compilation, see ``_BOUND``)."""
    if not isinstance(options, dict) or "probes" not in options:
        raise ConfigError(
            "backend 'tcgd' needs options={'probes': <path to a TOML config or a dict>}; "
            "see docs/compile-plugin.md"
        )
    with _BOUND_LOCK:
        bound = _BOUND.get(id(options))
        if bound is not None and bound[0] is options:
            return bound[1]
        session = _SESSION_OVERRIDE.get() or session_for_compile(
            load_config(options["probes"]),
            run_dir=options.get("run_dir"),
            name=options.get("run_name"),
            payload=options.get("payload"),
            overwrite=options.get("overwrite"),
        )
        _BOUND[id(options)] = (options, session)
        return session


def compile_with_probes(
    gm: torch.fx.GraphModule,
    example_inputs: Sequence[Any],
    *,
    mode: str | None = None,
    options: dict[str, Any] | None = None,
) -> Any:
    from torch._inductor.compile_fx import compile_fx

    session = session_for_options(options)  # type: ignore[arg-type]
    session.note_compile()
    inductor_options = {k: v for k, v in (options or {}).items() if k not in OUR_OPTIONS}
    mode = (options or {}).get("mode", mode)
    patches = inductor_patches(mode, inductor_options, session.insertion_pass)
    with _progress.compiling():
        compiled = compile_fx(
            gm, example_inputs, inner_compile=_kind_aware_inner_compile, config_patches=patches
        )
    return session.wrap(compiled)


# Sessions whose compile_fx wrapper is running in this context: compile_fx calls itself
# (config patches, graph-shape wrappers), and only the outermost call returns what Dynamo
# runs.
_WRAPPING: contextvars.ContextVar[frozenset[int]] = contextvars.ContextVar(
    "tcgd_wrapping", default=frozenset()
)


@contextlib.contextmanager
def delimiting_compiles(session: ProbeSession) -> Iterator[None]:
    """Inside the block, what Inductor's ``compile_fx`` returns to Dynamo is wrapped with
    ``session.wrap``, so each call of a model compiled there is one point, as with
    ``backend="tcgd"``. Dynamo's ``inductor`` backend (and torch.compile's default) look
    ``compile_fx`` up on its module at every compilation, in torch 2.6 through 2.11; a
    backend that bound the function at import is not seen (its points then fall back to
    the per-site rule: a site that runs again begins a new point)."""
    import torch._inductor.compile_fx as compile_fx_module

    original = compile_fx_module.compile_fx

    @functools.wraps(original)
    def compile_fx(*args: Any, **kwargs: Any) -> Any:
        active = _WRAPPING.get()
        if id(session) in active:
            return original(*args, **kwargs)
        token = _WRAPPING.set(active | {id(session)})
        try:
            with _progress.compiling():
                compiled = original(*args, **kwargs)
        finally:
            _WRAPPING.reset(token)
        return session.wrap(compiled)

    compile_fx_module.compile_fx = compile_fx
    try:
        yield
    finally:
        # A block that ends out of order leaves a later block's wrapper in place.
        if compile_fx_module.compile_fx is compile_fx:
            compile_fx_module.compile_fx = original


def tcgd_backend(gm: Any, example_inputs: Any, **kwargs: Any) -> Any:
    """The ``backend="tcgd"`` entry point (resolved through ``torch_dynamo_backends``)."""
    return compile_with_probes(gm, example_inputs, **kwargs)


def backend_options_of(compiled: Callable[..., Any]) -> dict[str, Any] | None:
    """The options a ``torch.compile(..., backend="tcgd")`` or ``tcgd_compile.compile``
    result compiles with, found through Dynamo's wrappers (attribute names of torch 2.6
    and of 2.11), or None for anything else."""

    def options_of(obj: Any) -> dict[str, Any] | None:
        if isinstance(obj, functools.partial) and obj.func is tcgd_backend:
            return obj.keywords.get("options")
        fn, kwargs = getattr(obj, "compiler_fn", None), getattr(obj, "kwargs", None)
        if fn is tcgd_backend and isinstance(kwargs, dict):
            return kwargs.get("options")
        return None

    callback: Any = None
    context = getattr(compiled, "dynamo_ctx", None)  # an OptimizedModule
    if context is not None:
        callback = getattr(context, "callback", None)
    else:
        # torch.compile(fn) returns a closure over its callback (and its context).
        code, cells = getattr(compiled, "__code__", None), getattr(compiled, "__closure__", None)
        if code is not None and cells:
            free = dict(zip(code.co_freevars, cells, strict=False))
            with contextlib.suppress(ValueError):
                if "callback" in free:
                    callback = free["callback"].cell_contents
                elif "self" in free:
                    callback = getattr(free["self"].cell_contents, "callback", None)
    seen: set[int] = set()
    obj = callback
    while obj is not None and id(obj) not in seen:
        seen.add(id(obj))
        found = options_of(obj)
        if found is not None:
            return found
        obj = next(
            (
                getattr(obj, name)
                for name in (
                    "_torchdynamo_orig_backend",
                    "_torchdynamo_orig_callable",
                    "__wrapped__",
                    "compiler_fn",
                )
                if getattr(obj, name, None) is not None
            ),
            None,
        )
    return None


def session_of(compiled: Callable[..., Any]) -> ProbeSession:
    """The session a model compiled with ``backend="tcgd"`` (or ``tcgd_compile.compile``)
    records into: ``flush()``, ``preview()``, ``finish()``. Before the model's first call
    (which compiles it) this opens the session it will record into."""
    options = vars(compiled).get("_tcgd_options") if hasattr(compiled, "__dict__") else None
    if options is None:
        options = backend_options_of(compiled)
    if options is None:
        raise InvalidInputError(
            f"session_of(): {type(compiled).__name__} {getattr(compiled, '__name__', '')!s}"
            " was not compiled with backend='tcgd' or tcgd_compile.compile(); for a model "
            "compiled inside `with tcgd_compile.probes(...) as session:` use that session"
        )
    return session_for_options(options)

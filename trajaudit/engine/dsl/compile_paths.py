"""Names and paths of the rule language, compiled (a mixin of :class:`rule_compiler.ExprCompiler`):
name resolution (top-level names, pack parameters, ``let`` bindings, quantifier variables, with
did-you-mean errors), field reads of steps and calls checked against the IR's field tables, and the
closures that read them while recording what they saw (evidence addresses)."""

from __future__ import annotations

from typing import Any

from trajaudit.engine.dsl import ast as A
from trajaudit.engine.dsl.builtins import BUILTINS, StepRange
from trajaudit.engine.dsl.compile_base import _NO, TOP_NAMES, C, _const, traj_info
from trajaudit.engine.dsl.paths import follow, recording, var_path
from trajaudit.engine.dsl.runtime import (
    CALL_FIELD_TYPES,
    CALL_FIELDS,
    STEP_FIELD_TYPES,
    STEP_FIELDS,
    Env,
    EvalError,
    View,
    child,
    type_name,
)
from trajaudit.registry import close_hint


class PathsMixin:
    """``_root``, ``_path`` and their helpers for :class:`ExprCompiler` (uses its ``compile``/``error``,
    ``params``, ``lets``, ``witnesses`` and ``uses``)."""

    def _root(self, node: A.Name, scope: dict[str, str]) -> C:
        name = node.id
        if name in scope:
            return C(lambda env: env.vars.get(name), scope[name],
                     loc=lambda env: (env.vars.get(name), env.addrs.get(name)))
        if name in self.lets:
            return C(lambda env: env.vars.get(name), self.lets[name],
                     loc=lambda env: (env.vars.get(name), env.addrs.get(name)))
        if name in self.witnesses:
            return C(lambda env: env.witness.get(name), "any")
        if name not in TOP_NAMES:
            known = sorted(set(TOP_NAMES) | set(scope) | set(self.lets) | self.witnesses)
            hint = close_hint(name, known + list(BUILTINS))
            raise self.error(node, f"unknown name {name!r}{hint} (names: {', '.join(known)})")
        self.uses.add(name)
        if name == "params":
            return _const(self.params, "any")
        if name == "step":
            return C(lambda env: env.step, "step", loc=lambda env: (env.step, env.step.address))
        if name == "call":
            return C(lambda env: env.call, "call", loc=lambda env: (env.call, env.call.address if env.call else None))
        if name == "output":
            def out(env: Env) -> Any:
                return env.step if env.step.step.kind == "tool" else None
            return C(out, "step", loc=lambda env: (out(env), env.step.address))
        if name == "content":
            def content(env: Env) -> Any:
                v = env.step.step.content
                env.seen.append((env.step.address + ".content", v, None))
                return v
            return C(content, "str", loc=lambda env: (env.step.step.content, env.step.address + ".content"))
        if name == "earlier":
            return C(lambda env: StepRange(0, env.k), "steps")
        if name == "later":
            return C(lambda env: StepRange(env.k + 1, len(env.tc.views)), "steps")
        if name == "steps":
            return C(lambda env: StepRange(0, len(env.tc.views)), "steps")
        return C(traj_info, "any")

    def _path(self, node: A.Expr, scope: dict[str, str]) -> C:
        """A chain of ``.field`` / ``[key]`` reads, compiled in named steps: the segments
        (:meth:`_segments`), each one folded into the constant or checked against the field tables
        (:meth:`_fold_segment`), then the closure chosen (:meth:`_path_fn`)."""
        root, segs = self._segments(node, scope)
        base = self._root(root, scope) if isinstance(root, A.Name) else self.compile(root, scope)
        typ, const = base.type, base.const
        keys: list[Any] = []
        for seg_node, key in segs:
            typ, const = self._fold_segment(root, seg_node, key, typ, const, keys)
        if const is not _NO:
            return _const(const, typ if typ != "any" else None)
        return self._path_fn(root, base, keys, typ, scope)

    def _segments(self, node: A.Expr, scope: dict[str, str]) -> tuple[A.Expr, list[tuple[A.Expr, Any]]]:
        """The path's root expression and its segments, root first: ``(node, field name)`` for
        ``.field``, ``(node, compiled key)`` for ``[key]``."""
        segs: list[tuple[A.Expr, Any]] = []
        root = node
        while isinstance(root, (A.Attr, A.Index)):
            if isinstance(root, A.Attr):
                segs.append((root, root.name))
            else:
                segs.append((root, self.compile(root.key, scope)))
            root = root.obj
        segs.reverse()
        return root, segs

    def _fold_segment(self, root: A.Expr, seg_node: A.Expr, key: Any, typ: str, const: Any,
                      keys: list[Any]) -> tuple[str, Any]:
        """One segment: appends its key (a name, a constant, or a key closure) to ``keys``, folds it
        into ``const`` while the path is constant (``params.x``) and returns the new ``(type, const)``.
        Raises a compile error on ``step[key]``, an unknown pack parameter or field."""
        if isinstance(key, C):
            kconst = key.const
            if typ in ("step", "call"):
                raise self.error(seg_node, f"a {typ} is read with .field, not [key]")
            keys.append(key.fn if kconst is _NO else kconst)
            key_val = kconst
        else:
            keys.append(key)
            key_val = key
        if const is not _NO:
            const = _NO if key_val is _NO else self._const_child(root, seg_node, const, key_val)
        return self._field_type(seg_node, typ, key_val), const

    def _const_child(self, root: A.Expr, seg_node: A.Expr, const: Any, key_val: Any) -> Any:
        """``const[key_val]`` at compile time; an unknown pack parameter gets a did-you-mean error."""
        if isinstance(root, A.Name) and root.id == "params" and isinstance(const, dict) \
                and key_val not in const and const is self.params:
            hint = close_hint(str(key_val), list(self.params))
            known = ", ".join(sorted(self.params)) or "none"
            raise self.error(seg_node, f"unknown pack parameter {key_val!r}{hint} (parameters: {known})")
        try:
            return child(const, key_val)
        except EvalError as e:
            raise self.error(seg_node, str(e)) from None

    def _path_fn(self, root: A.Expr, base: C, keys: list[Any], typ: str, scope: dict[str, str]) -> C:
        """The closure of a non-constant path: the field-table fast path for ``step.f…``/``call.f…``,
        a variable's view fast path (``paths.var_path``) when it applies, else the generic walk."""
        name = root.id if isinstance(root, A.Name) else None
        str_keys = bool(keys) and all(isinstance(k, str) for k in keys)
        if name in ("step", "call") and name not in scope and name not in self.lets and str_keys:
            return self._fast_path(name, keys, typ)
        generic = self._path_closure(base, keys, typ)
        if name is not None and (name in scope or name in self.lets) and base.type in ("step", "call", "any") \
                and str_keys:
            fast = var_path(name, base.type, keys, generic.fn, generic.loc)
            return generic if fast is None else C(fast[0], generic.type, loc=fast[1])
        return generic

    def _fast_path(self, root: str, keys: list[str], typ: str) -> C:
        """``step.f.x…`` / ``call.f.x…`` with constant keys: the first field read straight from the table."""
        getter, suffix = (STEP_FIELDS if root == "step" else CALL_FIELDS)[keys[0]]
        rest = keys[1:]
        is_step = root == "step"

        def loc(env: Env) -> tuple[Any, str | None]:
            view = env.step if is_step else env.call
            if view is None:
                return None, None
            return follow(getter(view), view.address + suffix, rest)

        if not rest:
            def fn(env: Env) -> Any:
                view = env.step if is_step else env.call
                if view is None:
                    return None
                v = getter(view)
                env.seen.append((view.address + suffix, v, None))
                return v
        else:
            fn = recording(loc)
        return C(fn, typ, loc=loc)

    def _field_type(self, node: A.Expr, typ: str, key: Any) -> str:
        if typ in ("step", "call"):
            table = STEP_FIELD_TYPES if typ == "step" else CALL_FIELD_TYPES
            if key not in table:
                hint = close_hint(str(key), list(table))
                raise self.error(node, f"a {typ} has no field {key!r}{hint} (fields: {', '.join(table)})")
            return table[key]
        if typ in ("steps", "calls", "seq"):
            raise self.error(node, "a sequence of steps has no fields; use a quantifier (exists/count/latest …)")
        if typ in ("num", "bool") and isinstance(key, str):
            raise self.error(node, f"a {typ} has no field {key!r}")
        return "any"

    def _path_closure(self, base: C, keys: list[Any], typ: str) -> C:
        bloc = base.loc or (lambda env: (base.fn(env), None))
        if not keys:  # a bare name: its own (value, address), recorded
            return C(recording(bloc), typ, loc=bloc)

        def loc(env: Env) -> tuple[Any, str | None]:
            v, addr = bloc(env)
            for k in keys:
                if callable(k):
                    k = k(env)
                if v is None:
                    return None, None
                if isinstance(v, View):
                    if not isinstance(k, str):
                        raise EvalError(f"a {type_name(v)} is read with .field, not [{k!r}]")
                    v, addr = v.field(k)
                else:
                    v = child(v, k)
                    addr = f"{addr}.{k}" if addr is not None else None
            return v, addr

        return C(recording(loc), typ, loc=loc)

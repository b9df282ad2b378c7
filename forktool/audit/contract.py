"""The EAGLE3 contract of one outer model class, decided statically the way vLLM's default setter works."""

from __future__ import annotations

import ast
from dataclasses import dataclass

from forktool.sourcetree import ClassRef, SourceTree

INTERFACES = "vllm.model_executor.models.interfaces"


@dataclass(frozen=True)
class Contract:
    """What the class declares and what its inner model implements; `reason` explains unknowns."""

    declared: bool
    implemented: bool | None  # None: could not be decided statically
    holder: str  # the module that would capture aux states, e.g. `language_model.model -> Qwen2Model`
    reason: str = ""
    passes_through: bool | None = None  # outer forward returns the inner output unchanged
    holder_classes: tuple[str, ...] = ()  # module.Class of each class the holder can be


def _is(ref: ClassRef, name: str) -> bool:
    return ref.name == name and ref.module == INTERFACES


def _method(tree: SourceTree, ref: ClassRef, name: str) -> tuple[ClassRef, ast.FunctionDef] | None:
    """First definition of method `name` along the class's ancestors."""
    for cls in tree.mro(ref):
        for node in cls.node.body:
            if isinstance(node, ast.FunctionDef) and node.name == name:
                return cls, node
    return None


def _delegated_holder(setter: ast.FunctionDef) -> str | None:
    """'a.b' when a custom setter hands the layers to `self.a.b._set_aux_hidden_state_layers(...)`; else None."""
    for node in ast.walk(setter):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                and node.func.attr == "_set_aux_hidden_state_layers":
            return _self_attr(node.func.value) or None
    return None


def _self_attr(node: ast.expr) -> str | None:
    """`self.a.b` -> 'a.b'; None for anything else."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    return ".".join(reversed(parts)) if isinstance(node, ast.Name) and node.id == "self" else None


def _init_assignments(tree: SourceTree, ref: ClassRef) -> dict[str, list[tuple[str, ast.expr, bool]]]:
    """attr -> [(module, value, inside _mark_language_model)] for `self.attr = value` in every __init__
    along the ancestors; a value that is a local variable is replaced by what that variable was set to."""
    result: dict[str, list[tuple[str, ast.expr, bool]]] = {}
    passed: dict[str, tuple[str, ast.expr]] = {}  # keyword -> (module, value) a subclass hands to super().__init__
    for owner in tree.mro(ref):
        init = next((n for n in owner.node.body if isinstance(n, ast.FunctionDef) and n.name == "__init__"), None)
        if init is not None:
            found: dict = {}
            params = {**_param_defaults(owner.module, init), **passed}
            _collect(owner.module, init, found, params)
            passed.update(_super_keywords(owner.module, init, params))
            # The most derived assignment wins: a subclass that sets self.model overrides its base's.
            for attr, values in found.items():
                result.setdefault(attr, values)
    return result


def _param_defaults(module: str, init: ast.FunctionDef) -> dict[str, tuple[str, ast.expr]]:
    """__init__ parameter -> (module, default): `transformer_type: type[M] = M` builds an M unless a subclass says."""
    args = init.args
    positional = list(zip(args.args[len(args.args) - len(args.defaults):], args.defaults))
    keyword = [(a, d) for a, d in zip(args.kwonlyargs, args.kw_defaults) if d is not None]
    return {a.arg: (module, d) for a, d in positional + keyword}


def _super_keywords(module: str, init: ast.FunctionDef, params: dict) -> dict[str, tuple[str, ast.expr]]:
    """Keywords this __init__ passes to `super().__init__(...)`, a forwarded parameter replaced by its value."""
    found = {}
    for node in ast.walk(init):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "__init__" \
                and isinstance(node.func.value, ast.Call) and getattr(node.func.value.func, "id", "") == "super":
            for kw in node.keywords:
                if kw.arg:
                    is_param = isinstance(kw.value, ast.Name) and kw.value.id in params
                    found[kw.arg] = params[kw.value.id] if is_param else (module, kw.value)
    return found


def _collect(module: str, init: ast.FunctionDef, result: dict, params: dict | None = None) -> None:
    local: dict[str, ast.expr] = {}
    params = params or {}

    def visit(nodes, marked: bool):
        for node in nodes:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                continue
            if isinstance(node, ast.With):
                is_mark = any(isinstance(item.context_expr, ast.Call)
                              and isinstance(item.context_expr.func, ast.Attribute)
                              and item.context_expr.func.attr == "_mark_language_model" for item in node.items)
                visit(node.body, marked or is_mark)
                continue
            if isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                for target in targets:
                    value = node.value
                    if isinstance(value, ast.Name) and value.id in local:
                        value = local[value.id]
                    where = module
                    if isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and value.func.id in params:
                        where, func = params[value.func.id]  # a class handed in as a parameter: its value
                        value = ast.Call(func=func, args=value.args, keywords=value.keywords)
                    attr = _self_attr(target)
                    if attr and "." not in attr:
                        result.setdefault(attr, []).append((where, value, marked))
                    elif isinstance(target, ast.Name):
                        local[target.id] = value
            for block in ("body", "orelse", "finalbody", "handlers"):
                children = getattr(node, block, None)
                if isinstance(children, list):
                    visit(children, marked)

    visit(init.body, False)


def _names(function: ast.FunctionDef) -> list[str]:
    return [n.attr if isinstance(n, ast.Attribute) else n.id for n in ast.walk(function)
            if isinstance(n, (ast.Attribute, ast.Name))]


def _names_aux(function: ast.FunctionDef) -> bool:
    return any("aux_hidden" in name for name in _names(function))


class ContractReader:
    """Decides contracts over one tree; `registry` maps architecture names to (module, class)."""

    def __init__(self, tree: SourceTree, registry: dict[str, tuple[str, str]]):
        self.tree, self.registry = tree, registry

    def classes_of(self, module: str, value: ast.expr, owner: ClassRef | None = None,
                   depth: int = 0) -> tuple[list[ClassRef], str]:
        """Classes an attribute's value can be, or [] and why not."""
        if isinstance(value, ast.Call) and owner is not None and depth < 3 and _self_attr(value.func):
            return self._via_self(owner, _self_attr(value.func), depth)
        if isinstance(value, ast.Call):
            func = value.func
            name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
            if name == "init_vllm_registered_model":
                arch = next((k.value for k in value.keywords if k.arg == "architectures"), None)
                if isinstance(arch, (ast.List, ast.Tuple)) and all(
                        isinstance(e, ast.Constant) and isinstance(e.value, str) for e in arch.elts):
                    refs = [r for e in arch.elts if e.value in self.registry
                            for r in self.tree.resolve(*self.registry[e.value])]
                    return refs, "" if refs else "language model architecture not in the registry"
                return [], "language model chosen from the checkpoint config at run time"
            refs = self.tree.resolve_expr(module, func)
            return refs, "" if refs else f"cannot resolve {ast.unparse(func)}"
        return [], f"attribute set from {ast.unparse(value)[:60]}"

    def _via_self(self, owner: ClassRef, name: str, depth: int) -> tuple[list[ClassRef], str]:
        """`self.name(...)`: a method's returned instance, or a class stored on an attribute."""
        method = _method(self.tree, owner, name)
        if method is not None:
            classes, reasons = [], []
            for node in ast.walk(method[1]):
                if isinstance(node, ast.Return) and node.value is not None:
                    refs, reason = self.classes_of(method[0].module, node.value, owner, depth + 1)
                    classes += [r for r in refs if r not in classes]
                    reasons += [reason] if reason else []
            return classes, "; ".join(reasons) if not classes else ""
        stored = _init_assignments(self.tree, owner).get(name, [])
        classes = [r for module, value, _ in stored for r in self.tree.resolve_expr(module, value)]
        return classes, "" if classes else f"cannot resolve self.{name}"

    def _attr_classes(self, ref: ClassRef, attr: str) -> tuple[list[ClassRef], str]:
        assigned = _init_assignments(self.tree, ref).get(attr, [])
        classes, reasons = [], []
        for module, value, _ in assigned:
            refs, reason = self.classes_of(module, value, ref)
            classes += [r for r in refs if r not in classes]
            reasons += [reason] if reason else []
        return classes, "; ".join(reasons)

    def _language_model_attr(self, ref: ClassRef) -> str | None:
        """The attribute the default setter's get_language_model()/language_model step lands on."""
        custom = _method(self.tree, ref, "get_language_model")
        if custom and custom[0].module != INTERFACES:
            for node in ast.walk(custom[1]):
                if isinstance(node, ast.Return) and node.value is not None:
                    attr = _self_attr(node.value)
                    if attr:
                        return attr
            return None
        assignments = _init_assignments(self.tree, ref)
        if "language_model" in assignments:
            return "language_model"
        if custom:  # SupportsMultiModal: the child assigned inside _mark_language_model
            marked = [attr for attr, values in assignments.items() if any(m for _, _, m in values)]
            return marked[0] if len(marked) == 1 else None
        return ""

    def contract(self, ref: ClassRef) -> Contract:
        ancestors = self.tree.mro(ref)
        declared = any(_is(a, "SupportsEagle3") for a in ancestors)
        setter = _method(self.tree, ref, "set_aux_hidden_state_layers")
        if setter and setter[0].module != INTERFACES:
            target = _delegated_holder(setter[1])
            if target is None:
                return Contract(declared, True, f"custom setter in {setter[0].key}")
            return self._judge(ref, declared, target, *self.path_classes(ref, target))
        lm_attr = self._language_model_attr(ref)
        if lm_attr is None:
            return Contract(declared, None, "?", "its language model is not one attribute set in __init__")
        parents, reason = ([ref], "") if lm_attr == "" else self.path_classes(ref, lm_attr)
        if not parents:
            return Contract(declared, None, lm_attr, reason)
        holders, via_model = [], False
        for parent in parents:
            if "model" not in _init_assignments(self.tree, parent):
                holders.append(parent)  # the default setter falls back to the parent itself
                continue
            inner, why = self._attr_classes(parent, "model")
            if not inner:
                return Contract(declared, None, f"{lm_attr or 'self'}.model", why)
            holders += [h for h in inner if h not in holders]
            via_model = True
        path = ".".join(p for p in (lm_attr, "model" if via_model else "") if p) or "self"
        return self._judge(ref, declared, path, holders, "", {lm_attr or "model", path})

    def _judge(self, ref: ClassRef, declared: bool, path: str, holders: list[ClassRef], why: str,
               callees: set[str] | None = None) -> Contract:
        """The contract once the holder classes at `path` are known (none: undecided, for `why`)."""
        if not holders:
            return Contract(declared, None, path, why)
        is_mixin = [any(_is(a, "EagleModelMixin") for a in self.tree.mro(h)) for h in holders]
        found = [self._captures(h) if m else (False, ()) for m, h in zip(is_mixin, holders)]
        mixins = [c for c, _ in found]
        names = ", ".join(sorted({h.name for h in holders}))
        via_helper = sorted({f"{h.name}.{name}" for (c, helpers), h in zip(found, holders) if c is None
                             for name in helpers})
        if via_helper:  # undecided: whether every path through forward reaches the helper is not followed
            return Contract(declared, None, f"{path} -> {names}",
                            f"forward names no aux hidden states itself; they are captured in code it calls "
                            f"(helper {', '.join(via_helper)}), and the static audit does not decide that every "
                            "path through forward reaches it",
                            self._passes_through(ref, callees or {path.partition(".")[0], path}),
                            tuple(sorted({h.key for h in holders})))
        implemented = True if all(mixins) else False if not any(mixins) else None
        dropped = [h.name for m, c, h in zip(is_mixin, mixins, holders) if m and not c]
        reason = "platform variants differ" if implemented is None else (
            f"{', '.join(dropped)} inherits EagleModelMixin but its forward never captures" if dropped else "")
        return Contract(declared, implemented, f"{path} -> {names}", reason,
                        self._passes_through(ref, callees or {path.partition(".")[0], path}),
                        tuple(sorted({h.key for h in holders})))

    def _captures(self, holder: ClassRef) -> tuple[bool | None, tuple[str, ...]]:
        """Whether the holder's forward (as inherited) touches aux hidden states: a mixin whose forward was
        overridden without capture would accept the layers and then never return them. (None, helpers) when
        forward names none itself but calls methods of its own that do (`self._stock_forward(...)`)."""
        for cls in self.tree.mro(holder):
            forward = next((n for n in cls.node.body if isinstance(n, ast.FunctionDef) and n.name == "forward"),
                           None)
            if forward is None:
                continue
            if _names_aux(forward):
                return True, ()
            if "super" not in _names(forward):  # an override that neither captures nor defers to its base
                helpers = tuple(sorted(self._capturing_helpers(holder, forward, {"forward"})))
                return (None, helpers) if helpers else (False, ())
            # else: defers to its base's forward, looked at next
        return True, ()

    def _capturing_helpers(self, holder: ClassRef, function: ast.FunctionDef, seen: set[str]) -> set[str]:
        """Methods of the holder that `function` calls as self.<name>(...) and that (or whose own such
        helpers) name aux hidden states."""
        found = set()
        for node in ast.walk(function):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                    and isinstance(node.func.value, ast.Name) and node.func.value.id == "self" \
                    and node.func.attr not in seen:
                seen.add(node.func.attr)
                method = _method(self.tree, holder, node.func.attr)
                if method is not None and (_names_aux(method[1])
                                           or self._capturing_helpers(holder, method[1], seen)):
                    found.add(node.func.attr)
        return found

    def path_classes(self, ref: ClassRef, dotted: str) -> tuple[list[ClassRef], str]:
        current, reason = [ref], ""
        for attr in dotted.split("."):
            step = []
            for cls in current:
                found, why = self._attr_classes(cls, attr)
                step += found
                reason = reason or why
            if not step:
                return [], reason or f"self.{dotted} is not assigned in __init__"
            current = step
        return current, ""

    def _passes_through(self, ref: ClassRef, callees: set[str], depth: int = 0) -> bool | None:
        """True if every return of forward is the inner model's call result, untouched."""
        found = _method(self.tree, ref, "forward")
        if found is None:
            return None
        forward = found[1]

        def inner_call(value: ast.expr) -> bool:
            if not isinstance(value, ast.Call):
                return False
            attr = _self_attr(value.func)
            return attr in callees or (attr is not None and depth < 2 and self._delegates(ref, attr, callees, depth))

        assigned: dict[str, list[ast.expr]] = {}
        for node in ast.walk(forward):
            if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
                assigned.setdefault(node.targets[0].id, []).append(node.value)
        returns = [n.value for n in ast.walk(forward) if isinstance(n, ast.Return) and n.value is not None]
        if not returns:
            return None
        return all(inner_call(v) or (isinstance(v, ast.Name) and v.id in assigned
                                     and all(inner_call(a) for a in assigned[v.id])) for v in returns)

    def _delegates(self, ref: ClassRef, attr: str, callees: set[str], depth: int) -> bool:
        """forward calls self.<attr>, a module on the way to the inner model whose forward passes it through
        (FunASR: self.model(...) returns self.model.decoder(...))."""
        rest = {c[len(attr) + 1:] for c in callees if c.startswith(attr + ".")}
        middle, _ = self.path_classes(ref, attr) if rest else ([], "")
        return bool(middle) and all(self._passes_through(m, rest, depth + 1) for m in middle)


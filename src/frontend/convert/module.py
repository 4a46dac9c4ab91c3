# What a subclass of torch.nn.Module inherits from it besides `training`, `train` and `eval` (`classes.rs`), written
# for this tool after PyTorch's documented behaviour, in the Python subset funcfuse converts. `module_methods.rs`
# adds each method a class does not define, renaming `_parameters` (the engines' walk over a module's parameters,
# buffers and sub-modules: `interp::objects::parameters`), `_buffer` (records a buffer), `_is_module` (an instance of a module class, not a stateless module) and `_refused`; `CLASS` is the
# class's name, as PyTorch's messages print it.


def parameters(self, recurse=True):
    return _parameters(self, recurse, False, "", True, "parameters")


def named_parameters(self, prefix="", recurse=True, remove_duplicate=True):
    return _parameters(self, recurse, True, prefix, remove_duplicate, "parameters")


def buffers(self, recurse=True):
    return _parameters(self, recurse, False, "", True, "buffers")


def named_buffers(self, prefix="", recurse=True, remove_duplicate=True):
    return _parameters(self, recurse, True, prefix, remove_duplicate, "buffers")


def named_children(self):
    return _parameters(self, False, True, "", True, "children")


def children(self):
    return [m for _, m in _parameters(self, False, True, "", True, "children")]


def named_modules(self, memo=None, prefix="", remove_duplicate=True):
    found = [(prefix, self)]
    for name, m in _parameters(self, False, True, "", True, "children"):
        below = prefix + "." + name if prefix else name
        if not _is_module(m):
            # a stateless module (`nn.ReLU()`), which holds none
            found.append((below, m))
            continue
        for n, sub in m.named_modules(None, below, remove_duplicate):
            if not remove_duplicate or not _is_module(sub) or all([id(sub) != id(s) for _, s in found if _is_module(s)]):
                found.append((n, sub))
    return found


def modules(self):
    return [m for _, m in self.named_modules()]


def apply(self, fn):
    for m in self.children():
        if _is_module(m):
            m.apply(fn)
        else:
            fn(m)
    fn(self)
    return self


def state_dict(self, destination=None, prefix="", keep_vars=False):
    # Detached or not, the tensors share the module's elements: writing them writes the module.
    return dict(_parameters(self, True, True, prefix, False, "state"))


def load_state_dict(self, state_dict, strict=True, assign=False):
    own = dict(_parameters(self, True, True, "", False, "state"))
    missing = []
    errors = []
    for key in own:
        if key not in state_dict:
            missing.append(key)
            continue
        value = state_dict[key]
        if not isinstance(value, torch.Tensor):
            errors.append(
                'While copying the parameter named "{}", expected torch.Tensor or Tensor-like object from checkpoint '
                "but received {}".format(key, type(value))
            )
        elif list(value.shape) != list(own[key].shape):
            errors.append(
                "size mismatch for {}: copying a param with shape torch.Size([{}]) from checkpoint, the shape in "
                "current model is torch.Size([{}]).".format(
                    key, ", ".join([str(d) for d in value.shape]), ", ".join([str(d) for d in own[key].shape])
                )
            )
        else:
            own[key].copy_(value)
    unexpected = [key for key in state_dict if key not in own]
    if strict:
        if len(unexpected) > 0:
            quoted = ", ".join(['"{}"'.format(k) for k in unexpected])
            errors.insert(0, "Unexpected key(s) in state_dict: {}. ".format(quoted))
        if len(missing) > 0:
            quoted = ", ".join(['"{}"'.format(k) for k in missing])
            errors.insert(0, "Missing key(s) in state_dict: {}. ".format(quoted))
    if len(errors) > 0:
        raise RuntimeError("Error(s) in loading state_dict for {}:\n\t{}".format("CLASS", "\n\t".join(errors)))
    return (missing, unexpected)


def register_buffer(self, name, tensor, persistent=True):
    if "." in name:
        raise KeyError('buffer name can\'t contain "."')
    if name == "":
        raise KeyError('buffer name can\'t be empty string ""')
    setattr(self, name, tensor)
    _buffer(self, name, persistent)


def register_parameter(self, name, param):
    if "." in name:
        raise KeyError('parameter name can\'t contain "."')
    if name == "":
        raise KeyError('parameter name can\'t be empty string ""')
    setattr(self, name, param)


def add_module(self, name, module):
    if module is not None and not _is_module(module):
        raise TypeError("{} is not a Module subclass".format(type(module).__name__))
    if not isinstance(name, str):
        raise TypeError("module name should be a string. Got {}".format(type(name).__name__))
    if "." in name:
        raise KeyError('module name can\'t contain ".", got: {}'.format(name))
    if name == "":
        raise KeyError('module name can\'t be empty string ""')
    setattr(self, name, module)


def register_module(self, name, module):
    self.add_module(name, module)


def requires_grad_(self, requires_grad=True):
    for p in self.parameters():
        p.requires_grad_(requires_grad)
    return self


def to(self, *args, **kwargs):
    for a in list(args) + list(kwargs.values()):
        if not isinstance(a, (str, torch.device)):
            _refused("Module.to(...) of a dtype or a tensor is not supported (only a device: programs run on the CPU)")
    return self


def cpu(self):
    return self


def _to_floating(self, dtype):
    # `double()`, `float()`, `half()`: every floating parameter and buffer of the module and its sub-modules made
    # of `dtype` (a parameter stays a parameter, with its `requires_grad`); other attributes are left as they are.
    own = [id(p) for p in self.parameters(False)]
    for name, t in self.named_parameters("", False) + self.named_buffers("", False):
        if t.is_floating_point():
            c = t.to(dtype)
            if id(t) in own:
                c = torch.nn.Parameter(c, t.requires_grad)
            setattr(self, name, c)
    for name, m in self.named_children():
        if _is_module(m):
            m._to_floating(dtype)
    return self


def double(self):
    return self._to_floating(torch.float64)


def float(self):
    return self._to_floating(torch.float32)


def half(self):
    return self._to_floating(torch.float16)


def share_memory(self):
    return self

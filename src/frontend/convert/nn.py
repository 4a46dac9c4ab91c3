# torch.nn's container, dropout and loss modules, as classes that funcfuse adds to a program file that mentions them
# (`prelude.rs`). Written for this tool after PyTorch's documented behaviour, in the Python subset funcfuse converts.
# Each class is renamed `nn·NAME`, which no program can bind; as subclasses of nn.Module they get `training` and the
# `train`/`eval` of the file's modules (`classes.rs`). `self._items` is the entry iterating and indexing an instance
# reach (`ast::ITEMS_KEY`), `_is_module(m)` whether `m` is a module (`ast::IS_MODULE`), `_refused(message)`
# funcfuse's refusal of what it does not support.


class Identity(nn.Module):
    def __init__(self, *args, **kwargs):
        super().__init__()

    def forward(self, input):
        return input


class _DropoutNd(nn.Module):
    def __init__(self, p=0.5, inplace=False):
        super().__init__()
        if p < 0 or p > 1:
            raise ValueError("dropout probability has to be between 0 and 1, but got {}".format(p))
        self.p = p
        self.inplace = inplace

    def forward(self, input):
        # Where it computes anything (training, p > 0) its mask is random, which F.dropout refuses; AlphaDropout's
        # alpha_dropout computes nothing either where F.dropout does not.
        return torch.nn.functional.dropout(input, self.p, self.training, self.inplace)


class Dropout(_DropoutNd):
    pass


class AlphaDropout(_DropoutNd):
    pass


class _ModuleSequence(nn.Module):
    # What ModuleList and Sequential share: a list of modules in `self._items`.

    def append(self, module):
        self._items.append(module)
        return self

    def extend(self, modules):
        for m in modules:
            self._items.append(m)
        return self

    def __len__(self):
        return len(self._items)

    def train(self, mode=True):
        self.training = mode
        for m in self._items:
            if _is_module(m):
                m.train(mode)
        return self


class ModuleList(_ModuleSequence):
    def __init__(self, modules=None):
        super().__init__()
        self._items = [] if modules is None else list(modules)

    def insert(self, index, module):
        self._items.insert(index, module)


class Sequential(_ModuleSequence):
    def __init__(self, *args):
        super().__init__()
        if len(args) == 1 and isinstance(args[0], dict):
            _refused("nn.Sequential(OrderedDict(...)) is not supported (pass the modules in order)")
        self._items = list(args)

    def forward(self, input):
        for module in self._items:
            input = module(input)
        return input

    def insert(self, index, module):
        self._items.insert(index, module)
        return self


class ModuleDict(nn.Module):
    def __init__(self, modules=None):
        super().__init__()
        self._items = {}
        if modules is not None:
            self.update(modules)

    def update(self, modules):
        # A dict or another ModuleDict (their items), else an iterable of (key, module) pairs.
        pairs = modules.items() if isinstance(modules, dict) or _is_module(modules) else modules
        for k, m in pairs:
            self._items[k] = m

    def keys(self):
        return self._items.keys()

    def values(self):
        return self._items.values()

    def items(self):
        return self._items.items()

    def pop(self, key):
        return self._items.pop(key)

    def __len__(self):
        return len(self._items)

    def train(self, mode=True):
        self.training = mode
        for m in self._items.values():
            if _is_module(m):
                m.train(mode)
        return self


class _Loss(nn.Module):
    def __init__(self, size_average=None, reduce=None, reduction="mean"):
        super().__init__()
        # The deprecated size_average and reduce, where either is given, decide the reduction.
        if size_average is not None or reduce is not None:
            if size_average is None:
                size_average = True
            if reduce is None:
                reduce = True
            if size_average and reduce:
                reduction = "mean"
            elif reduce:
                reduction = "sum"
            else:
                reduction = "none"
        self.reduction = reduction


class L1Loss(_Loss):
    def __init__(self, size_average=None, reduce=None, reduction="mean"):
        super().__init__(size_average, reduce, reduction)

    def forward(self, input, target):
        return torch.nn.functional.l1_loss(input, target, reduction=self.reduction)


class MSELoss(_Loss):
    def __init__(self, size_average=None, reduce=None, reduction="mean"):
        super().__init__(size_average, reduce, reduction)

    def forward(self, input, target):
        return torch.nn.functional.mse_loss(input, target, reduction=self.reduction)


class SmoothL1Loss(_Loss):
    def __init__(self, size_average=None, reduce=None, reduction="mean", beta=1.0):
        super().__init__(size_average, reduce, reduction)
        self.beta = beta

    def forward(self, input, target):
        return torch.nn.functional.smooth_l1_loss(input, target, reduction=self.reduction, beta=self.beta)


class BCEWithLogitsLoss(_Loss):
    def __init__(self, weight=None, size_average=None, reduce=None, reduction="mean", pos_weight=None):
        super().__init__(size_average, reduce, reduction)
        self.weight = weight
        self.pos_weight = pos_weight

    def forward(self, input, target):
        return torch.nn.functional.binary_cross_entropy_with_logits(
            input, target, weight=self.weight, pos_weight=self.pos_weight, reduction=self.reduction
        )


class CrossEntropyLoss(_Loss):
    def __init__(
        self, weight=None, size_average=None, ignore_index=-100, reduce=None, reduction="mean", label_smoothing=0.0
    ):
        super().__init__(size_average, reduce, reduction)
        self.weight = weight
        self.ignore_index = ignore_index
        self.label_smoothing = label_smoothing

    def forward(self, input, target):
        return torch.nn.functional.cross_entropy(
            input,
            target,
            weight=self.weight,
            ignore_index=self.ignore_index,
            reduction=self.reduction,
            label_smoothing=self.label_smoothing,
        )


class NLLLoss(_Loss):
    def __init__(self, weight=None, size_average=None, ignore_index=-100, reduce=None, reduction="mean"):
        super().__init__(size_average, reduce, reduction)
        self.weight = weight
        self.ignore_index = ignore_index

    def forward(self, input, target):
        return torch.nn.functional.nll_loss(
            input, target, weight=self.weight, ignore_index=self.ignore_index, reduction=self.reduction
        )


class KLDivLoss(_Loss):
    def __init__(self, size_average=None, reduce=None, reduction="mean", log_target=False):
        super().__init__(size_average, reduce, reduction)
        self.log_target = log_target

    def forward(self, input, target):
        return torch.nn.functional.kl_div(input, target, reduction=self.reduction, log_target=self.log_target)


class _Functional:
    # torch.nn.functional's functions written here (`prelude::class_name` maps `F.NAME` to them).

    @staticmethod
    def binary_cross_entropy(input, target, weight=None, size_average=None, reduce=None, reduction="mean"):
        if size_average is not None or reduce is not None:
            reduction = _Loss(size_average, reduce).reduction
        if tuple(target.shape) != tuple(input.shape):
            raise ValueError(
                "Using a target size ({}) that is different to the input size ({}) is deprecated. Please ensure they "
                "have the same size.".format(target.shape, input.shape)
            )
        if not bool(((input >= 0) & (input <= 1)).all()):
            raise RuntimeError("all elements of input should be between 0 and 1")
        # PyTorch's CPU kernel: (t - 1) * max(log1p(-x), -100) - t * max(log(x), -100), then the weight.
        loss = (target - 1) * torch.clamp(torch.log1p(-input), min=-100) - target * torch.clamp(torch.log(input), min=-100)
        if weight is not None:
            loss = loss * weight
        if reduction == "mean":
            return loss.mean()
        if reduction == "sum":
            return loss.sum()
        if reduction == "none":
            return loss
        raise ValueError(reduction + " is not a valid value for reduction")


class BCELoss(_Loss):
    def __init__(self, weight=None, size_average=None, reduce=None, reduction="mean"):
        super().__init__(size_average, reduce, reduction)
        self.weight = weight

    def forward(self, input, target):
        return torch.nn.functional.binary_cross_entropy(input, target, weight=self.weight, reduction=self.reduction)


class Embedding(nn.Module):
    # Its weight is the given `_weight` (as nn.Parameter, sharing its elements) or `from_pretrained`'s tensor: the
    # random initial weights PyTorch draws otherwise are refused.
    def __init__(
        self,
        num_embeddings,
        embedding_dim,
        padding_idx=None,
        max_norm=None,
        norm_type=2.0,
        scale_grad_by_freq=False,
        sparse=False,
        _weight=None,
        _freeze=False,
        device=None,
        dtype=None,
    ):
        super().__init__()
        self.num_embeddings = num_embeddings
        self.embedding_dim = embedding_dim
        if padding_idx is not None:
            if padding_idx > 0:
                assert padding_idx < self.num_embeddings, "Padding_idx must be within num_embeddings"
            elif padding_idx < 0:
                assert padding_idx >= -self.num_embeddings, "Padding_idx must be within num_embeddings"
                padding_idx = self.num_embeddings + padding_idx
        self.padding_idx = padding_idx
        self.max_norm = max_norm
        self.norm_type = norm_type
        self.scale_grad_by_freq = scale_grad_by_freq
        self.sparse = sparse
        if _weight is None:
            _refused(
                "nn.Embedding(...) draws random initial weights, which funcfuse does not: pass them as `_weight=` "
                "or use nn.Embedding.from_pretrained(weights)"
            )
        assert list(_weight.shape) == [num_embeddings, embedding_dim], "Shape of weight does not match num_embeddings and embedding_dim"
        self.weight = nn.Parameter(_weight, requires_grad=not _freeze)

    def forward(self, input):
        return torch.nn.functional.embedding(
            input, self.weight, self.padding_idx, self.max_norm, self.norm_type, self.scale_grad_by_freq, self.sparse
        )

    @staticmethod
    def from_pretrained(
        embeddings, freeze=True, padding_idx=None, max_norm=None, norm_type=2.0, scale_grad_by_freq=False, sparse=False
    ):
        assert embeddings.dim() == 2, "Embeddings parameter is expected to be 2-dimensional"
        rows, cols = embeddings.shape
        return torch.nn.Embedding(
            num_embeddings=rows,
            embedding_dim=cols,
            _weight=embeddings,
            _freeze=freeze,
            padding_idx=padding_idx,
            max_norm=max_norm,
            norm_type=norm_type,
            scale_grad_by_freq=scale_grad_by_freq,
            sparse=sparse,
        )

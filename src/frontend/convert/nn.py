# torch.nn's container, dropout, loss and weighted modules (Linear, convolutions, LayerNorm, recurrent layers and cells,
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


class ParameterList(nn.Module):
    # Each value a parameter: a tensor that is not one yet is made one, as PyTorch's `append` does.
    def __init__(self, values=None):
        super().__init__()
        self._items = []
        if values is not None:
            self.extend(values)

    def append(self, value):
        if not _is_parameter(value):
            value = torch.nn.Parameter(value)
        self._items.append(value)
        return self

    def extend(self, values):
        for v in values:
            self.append(v)
        return self

    def __len__(self):
        return len(self._items)

    def train(self, mode=True):
        # No sub-modules (iterating the list gives its parameters).
        self.training = mode
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
    # Its weight is the given `_weight` (as nn.Parameter, sharing its elements), `from_pretrained`'s tensor, or drawn
    # at random (`nn.init.normal_`, the padding row zeros) to be loaded before it is read.
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
            self.weight = nn.Parameter(torch.empty((num_embeddings, embedding_dim), dtype=dtype), requires_grad=not _freeze)
            torch.nn.init.normal_(self.weight)
            if padding_idx is not None:
                with torch.no_grad():
                    self.weight[padding_idx].fill_(0)
        else:
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


# Modules with weights. Their initial weights are drawn at random, as PyTorch draws them (`nn.init`), so that the
# engines let a program write them (load a checkpoint: `load_state_dict`, `copy_` through `state_dict()`) and refuse
# a read of any element still drawn. Parameters are registered in PyTorch's order, under its names.


class Linear(nn.Module):
    def __init__(self, in_features, out_features, bias=True, device=None, dtype=None):
        super().__init__()
        self.in_features = in_features
        self.out_features = out_features
        self.weight = nn.Parameter(torch.empty((out_features, in_features), dtype=dtype))
        if bias:
            self.bias = nn.Parameter(torch.empty(out_features, dtype=dtype))
        else:
            self.bias = None
        torch.nn.init.kaiming_uniform_(self.weight, a=5**0.5)
        if self.bias is not None:
            torch.nn.init.uniform_(self.bias)

    def forward(self, input):
        return torch.nn.functional.linear(input, self.weight, self.bias)


class _ConvNd(nn.Module):
    def __init__(self, n, in_channels, out_channels, kernel_size, stride, padding, dilation, groups, bias, padding_mode, dtype):
        super().__init__()
        if groups <= 0:
            raise ValueError("groups must be a positive integer")
        if in_channels % groups != 0:
            raise ValueError("in_channels must be divisible by groups")
        if out_channels % groups != 0:
            raise ValueError("out_channels must be divisible by groups")
        if padding_mode != "zeros":
            _refused("convolution modules with padding_mode other than 'zeros' are not supported")
        self.in_channels = in_channels
        self.out_channels = out_channels
        self.kernel_size = _ConvNd._tuple(kernel_size, n)
        self.stride = _ConvNd._tuple(stride, n)
        self.padding = padding if isinstance(padding, str) else _ConvNd._tuple(padding, n)
        self.dilation = _ConvNd._tuple(dilation, n)
        self.groups = groups
        self.padding_mode = padding_mode
        self.weight = nn.Parameter(torch.empty([out_channels, in_channels // groups] + list(self.kernel_size), dtype=dtype))
        if bias:
            self.bias = nn.Parameter(torch.empty(out_channels, dtype=dtype))
        else:
            self.bias = None
        torch.nn.init.kaiming_uniform_(self.weight, a=5**0.5)
        if self.bias is not None:
            torch.nn.init.uniform_(self.bias)

    def forward(self, input):
        args = (self.weight, self.bias, self.stride, self.padding, self.dilation, self.groups)
        if len(self.kernel_size) == 1:
            return torch.nn.functional.conv1d(input, *args)
        return torch.nn.functional.conv2d(input, *args)

    @staticmethod
    def _tuple(v, n):
        if isinstance(v, (tuple, list)):
            return tuple(v)
        return tuple([v] * n)


class Conv1d(_ConvNd):
    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, dilation=1, groups=1, bias=True, padding_mode="zeros", device=None, dtype=None):
        super().__init__(1, in_channels, out_channels, kernel_size, stride, padding, dilation, groups, bias, padding_mode, dtype)


class Conv2d(_ConvNd):
    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, dilation=1, groups=1, bias=True, padding_mode="zeros", device=None, dtype=None):
        super().__init__(2, in_channels, out_channels, kernel_size, stride, padding, dilation, groups, bias, padding_mode, dtype)


class LayerNorm(nn.Module):
    def __init__(self, normalized_shape, eps=1e-5, elementwise_affine=True, bias=True, device=None, dtype=None):
        super().__init__()
        if isinstance(normalized_shape, int):
            normalized_shape = (normalized_shape,)
        self.normalized_shape = tuple(normalized_shape)
        self.eps = eps
        self.elementwise_affine = elementwise_affine
        if elementwise_affine:
            self.weight = nn.Parameter(torch.ones(self.normalized_shape, dtype=dtype))
            if bias:
                self.bias = nn.Parameter(torch.zeros(self.normalized_shape, dtype=dtype))
            else:
                self.bias = None
        else:
            self.weight = None
            self.bias = None

    def forward(self, input):
        return torch.nn.functional.layer_norm(input, self.normalized_shape, self.weight, self.bias, self.eps)


class GroupNorm(nn.Module):
    def __init__(self, num_groups, num_channels, eps=1e-5, affine=True, device=None, dtype=None):
        super().__init__()
        if num_channels % num_groups != 0:
            raise ValueError("num_channels must be divisible by num_groups")
        self.num_groups = num_groups
        self.num_channels = num_channels
        self.eps = eps
        self.affine = affine
        if affine:
            self.weight = nn.Parameter(torch.ones(num_channels, dtype=dtype))
            self.bias = nn.Parameter(torch.zeros(num_channels, dtype=dtype))
        else:
            self.weight = None
            self.bias = None

    def forward(self, input):
        return torch.nn.functional.group_norm(input, self.num_groups, self.weight, self.bias, self.eps)


class _BatchNorm(nn.Module):
    # BatchNorm1d, 2d and 3d: the running statistics are buffers, updated in place by F.batch_norm in training.
    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=True, track_running_stats=True, device=None, dtype=None):
        super().__init__()
        self.num_features = num_features
        self.eps = eps
        self.momentum = momentum
        self.affine = affine
        self.track_running_stats = track_running_stats
        if affine:
            self.weight = nn.Parameter(torch.ones(num_features, dtype=dtype))
            self.bias = nn.Parameter(torch.zeros(num_features, dtype=dtype))
        else:
            self.weight = None
            self.bias = None
        if track_running_stats:
            self.register_buffer("running_mean", torch.zeros(num_features, dtype=dtype))
            self.register_buffer("running_var", torch.ones(num_features, dtype=dtype))
            self.register_buffer("num_batches_tracked", torch.tensor(0, dtype=torch.long))
        else:
            self.running_mean = None
            self.running_var = None
            self.num_batches_tracked = None

    def reset_running_stats(self):
        if self.track_running_stats:
            self.running_mean.zero_()
            self.running_var.fill_(1)
            self.num_batches_tracked.zero_()

    def reset_parameters(self):
        self.reset_running_stats()
        if self.affine:
            torch.nn.init.ones_(self.weight)
            torch.nn.init.zeros_(self.bias)

    def forward(self, input):
        self._check_input_dim(input)
        if self.momentum is None:
            exponential_average_factor = 0.0
        else:
            exponential_average_factor = self.momentum
        if self.training and self.track_running_stats:
            if self.num_batches_tracked is not None:
                self.num_batches_tracked.add_(1)
                if self.momentum is None:
                    exponential_average_factor = 1.0 / float(self.num_batches_tracked)
                else:
                    exponential_average_factor = self.momentum
        if self.training:
            bn_training = True
        else:
            bn_training = (self.running_mean is None) and (self.running_var is None)
        return torch.nn.functional.batch_norm(
            input,
            self.running_mean if not self.training or self.track_running_stats else None,
            self.running_var if not self.training or self.track_running_stats else None,
            self.weight,
            self.bias,
            bn_training,
            exponential_average_factor,
            self.eps,
        )


class BatchNorm1d(_BatchNorm):
    def _check_input_dim(self, input):
        if input.dim() != 2 and input.dim() != 3:
            raise ValueError("expected 2D or 3D input (got {}D input)".format(input.dim()))


class BatchNorm2d(_BatchNorm):
    def _check_input_dim(self, input):
        if input.dim() != 4:
            raise ValueError("expected 4D input (got {}D input)".format(input.dim()))


class BatchNorm3d(_BatchNorm):
    def _check_input_dim(self, input):
        if input.dim() != 5:
            raise ValueError("expected 5D input (got {}D input)".format(input.dim()))


class _RNNBase(nn.Module):
    # RNN, LSTM and GRU: `gates` rows of weights per hidden unit; per layer and direction, the parameters
    # weight_ih_l{k}{_reverse}, weight_hh_l{k}{_reverse}, bias_ih_l{k}{_reverse}, bias_hh_l{k}{_reverse}, in that order.
    def __init__(self, mode, gates, input_size, hidden_size, num_layers, bias, batch_first, dropout, bidirectional, dtype):
        super().__init__()
        if not isinstance(dropout, (int, float)) or isinstance(dropout, bool) or dropout < 0 or dropout > 1:
            raise ValueError("dropout should be a number in range [0, 1] representing the probability of an element being zeroed")
        if not isinstance(hidden_size, int) or isinstance(hidden_size, bool):
            raise TypeError("hidden_size should be of type int")
        if hidden_size <= 0:
            raise ValueError("hidden_size must be greater than zero")
        if num_layers <= 0:
            raise ValueError("num_layers must be greater than zero")
        self.mode = mode
        self.input_size = input_size
        self.hidden_size = hidden_size
        self.num_layers = num_layers
        self.bias = bias
        self.batch_first = batch_first
        self.dropout = float(dropout)
        self.bidirectional = bidirectional
        self.proj_size = 0
        directions = 2 if bidirectional else 1
        for layer in range(num_layers):
            for direction in range(directions):
                suffix = "_reverse" if direction == 1 else ""
                layer_input = input_size if layer == 0 else hidden_size * directions
                setattr(self, "weight_ih_l{}{}".format(layer, suffix), nn.Parameter(torch.empty((gates * hidden_size, layer_input), dtype=dtype)))
                setattr(self, "weight_hh_l{}{}".format(layer, suffix), nn.Parameter(torch.empty((gates * hidden_size, hidden_size), dtype=dtype)))
                if bias:
                    setattr(self, "bias_ih_l{}{}".format(layer, suffix), nn.Parameter(torch.empty(gates * hidden_size, dtype=dtype)))
                    setattr(self, "bias_hh_l{}{}".format(layer, suffix), nn.Parameter(torch.empty(gates * hidden_size, dtype=dtype)))
        stdv = 1.0 / hidden_size**0.5
        for weight in self.parameters():
            torch.nn.init.uniform_(weight, -stdv, stdv)

    def flatten_parameters(self):
        pass

    def _weights(self, layer, direction):
        suffix = "_reverse" if direction == 1 else ""
        w_ih = getattr(self, "weight_ih_l{}{}".format(layer, suffix))
        w_hh = getattr(self, "weight_hh_l{}{}".format(layer, suffix))
        if self.bias:
            return w_ih, w_hh, getattr(self, "bias_ih_l{}{}".format(layer, suffix)), getattr(self, "bias_hh_l{}{}".format(layer, suffix))
        return w_ih, w_hh, None, None

    def _run(self, input, h0, c0):
        # input: (L, N, H_in); h0, c0: (layers * directions, N, H). The input projections of all steps first, as
        # PyTorch's CPU kernels compute them, then the steps.
        directions = 2 if self.bidirectional else 1
        steps = input.shape[0]
        hs = []
        cs = []
        layer_input = input
        for layer in range(self.num_layers):
            outs = []
            for direction in range(directions):
                w_ih, w_hh, b_ih, b_hh = self._weights(layer, direction)
                projected = torch.nn.functional.linear(layer_input, w_ih, b_ih)
                h = h0[layer * directions + direction]
                c = c0[layer * directions + direction] if c0 is not None else None
                out = layer_input.new_zeros((steps, h.shape[0], self.hidden_size))
                for s in range(steps):
                    t = s if direction == 0 else steps - 1 - s
                    h, c = self._cell(projected[t], h, c, w_hh, b_hh)
                    out[t] = h
                outs.append(out)
                hs.append(h)
                cs.append(c)
            layer_input = outs[0] if directions == 1 else torch.cat(outs, 2)
            if self.dropout > 0 and self.training and layer < self.num_layers - 1:
                layer_input = torch.nn.functional.dropout(layer_input, self.dropout, True)
        return layer_input, torch.stack(hs, 0), (torch.stack(cs, 0) if c0 is not None else None)

    def _forward(self, input, hx, cx):
        directions = 2 if self.bidirectional else 1
        if input.dim() not in (2, 3):
            raise ValueError("{}: Expected input to be 2D or 3D, got {}D instead".format(self.mode, input.dim()))
        batched = input.dim() == 3
        if not batched:
            input = input.unsqueeze(1)
            if hx is not None:
                if hx.dim() != 2:
                    raise RuntimeError("For unbatched 2-D input, hx should also be 2-D but got {}-D tensor".format(hx.dim()))
                hx = hx.unsqueeze(1)
                if cx is not None:
                    cx = cx.unsqueeze(1)
        else:
            if hx is not None and hx.dim() != 3:
                raise RuntimeError("For batched 3-D input, hx should also be 3-D but got {}-D tensor".format(hx.dim()))
            if self.batch_first:
                input = input.transpose(0, 1)
        if input.shape[2] != self.input_size:
            raise RuntimeError("input.size(-1) must be equal to input_size. Expected {}, got {}".format(self.input_size, input.shape[2]))
        state = (self.num_layers * directions, input.shape[1], self.hidden_size)
        if hx is None:
            hx = torch.zeros(state, dtype=input.dtype)
            if self.mode == "LSTM":
                cx = torch.zeros(state, dtype=input.dtype)
        for s in ([hx] if cx is None else [hx, cx]):
            if tuple(s.shape) != state:
                expected = ", ".join([str(d) for d in state])
                got = ", ".join([str(d) for d in s.shape])
                raise RuntimeError("Expected hidden size ({}), got [{}]".format(expected, got))
        output, h_n, c_n = self._run(input, hx, cx)
        if not batched:
            output = output.squeeze(1)
            h_n = h_n.squeeze(1)
            if c_n is not None:
                c_n = c_n.squeeze(1)
        elif self.batch_first:
            output = output.transpose(0, 1)
        return output, h_n, c_n


class RNN(_RNNBase):
    def __init__(self, input_size, hidden_size, num_layers=1, nonlinearity="tanh", bias=True, batch_first=False, dropout=0.0, bidirectional=False, device=None, dtype=None):
        if nonlinearity not in ("tanh", "relu"):
            raise ValueError("Unknown nonlinearity '{}'. Select from 'tanh' or 'relu'.".format(nonlinearity))
        super().__init__("RNN_TANH" if nonlinearity == "tanh" else "RNN_RELU", 1, input_size, hidden_size, num_layers, bias, batch_first, dropout, bidirectional, dtype)
        self.nonlinearity = nonlinearity

    def _cell(self, projected, h, c, w_hh, b_hh):
        pre = projected + torch.nn.functional.linear(h, w_hh, b_hh)
        return (torch.tanh(pre) if self.nonlinearity == "tanh" else torch.relu(pre)), None

    def forward(self, input, hx=None):
        output, h_n, _ = self._forward(input, hx, None)
        return output, h_n


class LSTM(_RNNBase):
    def __init__(self, input_size, hidden_size, num_layers=1, bias=True, batch_first=False, dropout=0.0, bidirectional=False, proj_size=0, device=None, dtype=None):
        if proj_size != 0:
            _refused("nn.LSTM with proj_size is not supported")
        super().__init__("LSTM", 4, input_size, hidden_size, num_layers, bias, batch_first, dropout, bidirectional, dtype)

    def _cell(self, projected, h, c, w_hh, b_hh):
        gates = torch.nn.functional.linear(h, w_hh, b_hh) + projected
        i, f, g, o = gates.chunk(4, -1)
        c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
        return torch.sigmoid(o) * torch.tanh(c), c

    def forward(self, input, hx=None):
        h0, c0 = (None, None) if hx is None else hx
        output, h_n, c_n = self._forward(input, h0, c0)
        return output, (h_n, c_n)


class GRU(_RNNBase):
    def __init__(self, input_size, hidden_size, num_layers=1, bias=True, batch_first=False, dropout=0.0, bidirectional=False, device=None, dtype=None):
        super().__init__("GRU", 3, input_size, hidden_size, num_layers, bias, batch_first, dropout, bidirectional, dtype)

    def _cell(self, projected, h, c, w_hh, b_hh):
        hidden = torch.nn.functional.linear(h, w_hh, b_hh)
        i_r, i_z, i_n = projected.chunk(3, -1)
        h_r, h_z, h_n = hidden.chunk(3, -1)
        r = torch.sigmoid(i_r + h_r)
        z = torch.sigmoid(i_z + h_z)
        n = torch.tanh(i_n + r * h_n)
        return (h - n) * z + n, None

    def forward(self, input, hx=None):
        output, h_n, _ = self._forward(input, hx, None)
        return output, h_n


class _RNNCellBase(nn.Module):
    def __init__(self, gates, input_size, hidden_size, bias, dtype):
        super().__init__()
        self.input_size = input_size
        self.hidden_size = hidden_size
        self.bias = bias
        self.weight_ih = nn.Parameter(torch.empty((gates * hidden_size, input_size), dtype=dtype))
        self.weight_hh = nn.Parameter(torch.empty((gates * hidden_size, hidden_size), dtype=dtype))
        if bias:
            self.bias_ih = nn.Parameter(torch.empty(gates * hidden_size, dtype=dtype))
            self.bias_hh = nn.Parameter(torch.empty(gates * hidden_size, dtype=dtype))
        else:
            self.bias_ih = None
            self.bias_hh = None
        stdv = 1.0 / hidden_size**0.5 if hidden_size > 0 else 0
        for weight in self.parameters():
            torch.nn.init.uniform_(weight, -stdv, stdv)

    def _batched(self, input, hx, name):
        if input.dim() not in (1, 2):
            raise ValueError("{}: Expected input to be 1D or 2D, got {}D instead".format(name, input.dim()))
        if hx is not None and input.dim() != hx.dim():
            raise RuntimeError("{}: Expected hidden to be {}D, got {}D instead".format(name, input.dim(), hx.dim()))
        return input.dim() == 2


class RNNCell(_RNNCellBase):
    def __init__(self, input_size, hidden_size, bias=True, nonlinearity="tanh", device=None, dtype=None):
        super().__init__(1, input_size, hidden_size, bias, dtype)
        self.nonlinearity = nonlinearity

    def forward(self, input, hx=None):
        batched = self._batched(input, hx, "RNNCell")
        x = input if batched else input.unsqueeze(0)
        h = (torch.zeros((x.shape[0], self.hidden_size), dtype=x.dtype) if hx is None else (hx if batched else hx.unsqueeze(0)))
        pre = torch.nn.functional.linear(x, self.weight_ih, self.bias_ih) + torch.nn.functional.linear(h, self.weight_hh, self.bias_hh)
        if self.nonlinearity == "tanh":
            out = torch.tanh(pre)
        elif self.nonlinearity == "relu":
            out = torch.relu(pre)
        else:
            raise RuntimeError("Unknown nonlinearity: {}".format(self.nonlinearity))
        return out if batched else out.squeeze(0)


class LSTMCell(_RNNCellBase):
    def __init__(self, input_size, hidden_size, bias=True, device=None, dtype=None):
        super().__init__(4, input_size, hidden_size, bias, dtype)

    def forward(self, input, hx=None):
        batched = self._batched(input, None if hx is None else hx[0], "LSTMCell")
        x = input if batched else input.unsqueeze(0)
        if hx is None:
            h = torch.zeros((x.shape[0], self.hidden_size), dtype=x.dtype)
            c = torch.zeros((x.shape[0], self.hidden_size), dtype=x.dtype)
        else:
            h, c = hx
            if not batched:
                h = h.unsqueeze(0)
                c = c.unsqueeze(0)
        gates = torch.nn.functional.linear(h, self.weight_hh, self.bias_hh) + torch.nn.functional.linear(x, self.weight_ih, self.bias_ih)
        i, f, g, o = gates.chunk(4, 1)
        c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
        h = torch.sigmoid(o) * torch.tanh(c)
        if not batched:
            return h.squeeze(0), c.squeeze(0)
        return h, c


class GRUCell(_RNNCellBase):
    def __init__(self, input_size, hidden_size, bias=True, device=None, dtype=None):
        super().__init__(3, input_size, hidden_size, bias, dtype)

    def forward(self, input, hx=None):
        batched = self._batched(input, hx, "GRUCell")
        x = input if batched else input.unsqueeze(0)
        h = (torch.zeros((x.shape[0], self.hidden_size), dtype=x.dtype) if hx is None else (hx if batched else hx.unsqueeze(0)))
        i_r, i_z, i_n = torch.nn.functional.linear(x, self.weight_ih, self.bias_ih).chunk(3, 1)
        h_r, h_z, h_n = torch.nn.functional.linear(h, self.weight_hh, self.bias_hh).chunk(3, 1)
        r = torch.sigmoid(i_r + h_r)
        z = torch.sigmoid(i_z + h_z)
        n = torch.tanh(i_n + r * h_n)
        out = (h - n) * z + n
        return out if batched else out.squeeze(0)

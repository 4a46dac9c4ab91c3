# torch.nn.utils' gradient clipping and parameter flattening, as static methods of a class that funcfuse adds to a
# program file that names them (`prelude.rs`; `prelude::class_name` maps `torch.nn.utils.NAME` to them). Written for
# this tool after PyTorch's documented behaviour on the CPU (the foreach paths: the same operations in the same order,
# so that results match PyTorch's to rounding), in the Python subset funcfuse converts.


class _Utils:
    @staticmethod
    def clip_grad_norm_(parameters, max_norm, norm_type=2.0, error_if_nonfinite=False, foreach=None):
        if isinstance(parameters, torch.Tensor):
            parameters = [parameters]
        else:
            parameters = list(parameters)
        grads = [p.grad for p in parameters if p.grad is not None]
        total_norm = _Utils.get_total_norm(grads, norm_type, error_if_nonfinite, foreach)
        _Utils.clip_grads_with_norm_(parameters, max_norm, total_norm, foreach)
        return total_norm

    @staticmethod
    def get_total_norm(tensors, norm_type=2.0, error_if_nonfinite=False, foreach=None):
        if isinstance(tensors, torch.Tensor):
            tensors = [tensors]
        else:
            tensors = list(tensors)
        norm_type = float(norm_type)
        if len(tensors) == 0:
            return torch.tensor(0.0)
        norms = torch._foreach_norm(tensors, norm_type)
        total_norm = torch.linalg.vector_norm(torch.stack(list(norms)), norm_type)
        if error_if_nonfinite and bool(torch.logical_or(total_norm.isnan(), total_norm.isinf())):
            raise RuntimeError(
                "The total norm of order "
                + str(norm_type)
                + " for gradients from `parameters` is non-finite, so it cannot be clipped. To disable this error "
                "and scale the gradients by the non-finite norm anyway, set `error_if_nonfinite=False`"
            )
        return total_norm

    @staticmethod
    def clip_grads_with_norm_(parameters, max_norm, total_norm, foreach=None):
        if isinstance(parameters, torch.Tensor):
            parameters = [parameters]
        grads = [p.grad for p in parameters if p.grad is not None]
        max_norm = float(max_norm)
        if len(grads) == 0:
            return
        clip_coef = max_norm / (total_norm + 1e-6)
        clip_coef_clamped = torch.clamp(clip_coef, max=1.0)
        torch._foreach_mul_(grads, clip_coef_clamped)

    @staticmethod
    def clip_grad_value_(parameters, clip_value, foreach=None):
        if isinstance(parameters, torch.Tensor):
            parameters = [parameters]
        clip_value = float(clip_value)
        grads = [p.grad for p in parameters if p.grad is not None]
        if len(grads) == 0:
            return
        torch._foreach_clamp_min_(grads, -clip_value)
        torch._foreach_clamp_max_(grads, clip_value)

    @staticmethod
    def parameters_to_vector(parameters):
        vec = []
        for param in parameters:
            vec.append(param.view(-1))
        return torch.cat(vec)

# torch.autograd's Function, as classes that funcfuse adds to a program file that subclasses it (`prelude.rs`).
# Without autograd only the forward runs: `C.apply(*args)` (made for each subclass by `classes.rs`) calls C's static
# `forward` with a FunctionCtx first; `backward` is never called.


class Function:
    pass


class FunctionCtx:
    def __init__(self):
        self.saved_tensors = ()
        self.needs_input_grad = ()

    def save_for_backward(self, *tensors):
        self.saved_tensors = tensors

    def mark_dirty(self, *args):
        pass

    def mark_non_differentiable(self, *args):
        pass

    def set_materialize_grads(self, value):
        pass

# What a `@contextlib.contextmanager` function returns once funcfuse has split it at its `yield`
# (`context_manager.rs`): the yielded value and a function running the code after the `yield`. Added to a program
# file that names `contextmanager` (`prelude.rs`).


class _GeneratorContextManager:
    def __init__(self, value, exit):
        self.value = value
        self.exit = exit

    def __enter__(self):
        return self.value

    def __exit__(self, typ, value, traceback):
        self.exit()
        return False

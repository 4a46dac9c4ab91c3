# `distutils.util.strtobool`, as a static method that funcfuse adds to a program file that names it (`prelude.rs`),
# after Python's documented behaviour (configuration flags read from strings: pytorch-kaldi's options).


class _Util:
    @staticmethod
    def strtobool(val):
        val = val.lower()
        if val in ("y", "yes", "t", "true", "on", "1"):
            return 1
        elif val in ("n", "no", "f", "false", "off", "0"):
            return 0
        else:
            raise ValueError("invalid truth value '" + val + "'")

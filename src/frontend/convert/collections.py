# collections.deque, as a class that funcfuse adds to a program file that names it (`prelude.rs`), after Python's
# documented behaviour: a list of items (`self._items`, which iterating and indexing the instance reach) and an
# optional maxlen, past which appending at one end drops an item at the other.


class deque:
    def __init__(self, iterable=(), maxlen=None):
        if maxlen is not None and maxlen < 0:
            raise ValueError("maxlen must be non-negative")
        self._items = []
        self.maxlen = maxlen
        for x in iterable:
            self.append(x)

    def append(self, x):
        self._items.append(x)
        if self.maxlen is not None and len(self._items) > self.maxlen:
            self._items.pop(0)

    def appendleft(self, x):
        self._items.insert(0, x)
        if self.maxlen is not None and len(self._items) > self.maxlen:
            self._items.pop()

    def extend(self, iterable):
        for x in iterable:
            self.append(x)

    def extendleft(self, iterable):
        for x in iterable:
            self.appendleft(x)

    def pop(self):
        if len(self._items) == 0:
            raise IndexError("pop from an empty deque")
        return self._items.pop()

    def popleft(self):
        if len(self._items) == 0:
            raise IndexError("pop from an empty deque")
        return self._items.pop(0)

    def clear(self):
        while len(self._items) > 0:
            self._items.pop()

    def __len__(self):
        return len(self._items)

"""tui-search: search a folder of markdown from the keyboard."""

import os as _os

# Search does many small matrix products (soft matching) while the watcher writes in another
# thread or process. OpenBLAS's worker threads spin between calls and took about a third more
# CPU than the searches themselves, starving the index writer on small machines (measured:
# a 1,000-file burst applied in 23 s instead of 15 s). One BLAS thread is also faster for
# products this small. Set before numpy loads; an explicit user setting wins.
_os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

# the methods ``dataclasses`` writes for the package's classes: compiled once, not at every
# start (``core.dataclass_code``)
from tui_search.core.dataclass_code import install as _install_dataclass_code  # noqa: E402

_install_dataclass_code()

__version__ = "0.1.0"

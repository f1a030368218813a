"""jieba, imported on first use, without the lines it logs to stderr as it loads its
dictionary (`Building prefix dict …`, `Loading model cost …`)."""

from __future__ import annotations

import logging
from typing import Any

from graphstore.optional import optional_import


def quiet_jieba() -> Any:
    """The `jieba` module, with `jieba.posseg` loaded and its logger at warnings only."""
    jieba = optional_import("jieba", "Chinese word splitting")
    optional_import("jieba.posseg", "Chinese word splitting")
    jieba.setLogLevel(logging.WARNING)
    return jieba

# Copies a GGUF with tokenizer.chat_template set (scripts/server-test.sh: a template llm-server's
# built-ins do not know, so it must go through the Jinja renderer).
#   /usr/bin/python3 tests/server/add_chat_template.py IN.gguf OUT.gguf TEMPLATE
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "gguf-py"))
import numpy as np  # noqa: E402
from gguf.reader import GGUFReader  # noqa: E402
from gguf.writer import GGUFWriter  # noqa: E402

src, dst, template = sys.argv[1:4]
r = GGUFReader(src)
w = GGUFWriter(dst)
for key, f in r.fields.items():
    w.add_kv(key, f.value, f.type, f.array_type)
w.add_string("tokenizer.chat_template", template)
for t in r.tensors:
    w.add_tensor(t.name, np.array(t.data), t.type, t.shape)
w.write()

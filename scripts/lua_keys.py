"""Declare in each Lua script exactly the keys its code (with its includes) uses, and name the file
after their number: ``python scripts/lua_keys.py`` shows what it would change, ``--fix`` does it.

The loader refuses a script that uses an undeclared key or whose name's count is wrong; this
keeps the declarations true after an include starts using a new key.
"""

import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from queues.engine import keys, scripts  # noqa: E402


def main(fix):
    changed = 0
    for path in sorted(scripts.LUA_DIR.glob("*.lua")):
        text = path.read_text()
        parts = []
        scripts._resolve_includes(scripts.LUA_DIR, text, path.name, set(), parts)
        used = set(scripts._K_USE_RE.findall("\n".join([*parts, text])))
        kinds = [k for k in (*keys.QUEUE_KINDS, *keys.BATCH_KINDS) if k in used]
        declared = (scripts._KEYS_RE.findall(text) or [""])[0].split()
        name = f"{path.stem.rpartition('-')[0]}-{len(kinds)}.lua"
        if declared == kinds and path.name == name:
            continue
        changed += 1
        print(f"{path.name} -> {name}: keys {' '.join(kinds)}")
        if fix:
            path.write_text(re.sub(r"^-- Keys:.*$", "-- Keys: " + " ".join(kinds), text, count=1, flags=re.M))
            path.rename(path.with_name(name))
    return changed


if __name__ == "__main__":
    main("--fix" in sys.argv)

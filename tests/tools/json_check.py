#!/usr/bin/env python3
"""json_check.py JSON EXPR... - exit 0 when every Python expression EXPR,
evaluated over the parsed JSON document bound to `d`, is true; otherwise
print each false one and the document (indented) on stderr and exit 1.
A test's assertions over xsock-stat --json and xsock-check --json.
"""
import json
import sys


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    d = json.loads(sys.argv[1])
    bad = [e for e in sys.argv[2:] if not eval(e, {"d": d})]
    for e in bad:
        print("false:", e, file=sys.stderr)
    if bad:
        print(json.dumps(d, indent=1), file=sys.stderr)
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()

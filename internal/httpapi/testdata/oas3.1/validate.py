"""Validates an OpenAPI 3.1 document against the OAS 3.1 schemas here.

Usage: validate.py SCHEMA_DIR DOCUMENT. Prints one line per error and exits
1 when there is any, 0 when the document is valid under both schema.json
(the structure) and schema-base.json (every Schema Object under the OAS
dialect). Needs jsonschema >= 4.0 (Draft 2020-12); nothing is fetched: the
store holds every schema a $ref reaches (the 2020-12 metaschemas ship with
jsonschema).
"""
import json
import sys

from jsonschema import Draft202012Validator, RefResolver


def load(path):
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def main():
    schema_dir, doc_path = sys.argv[1], sys.argv[2]
    store = {}
    for name in ("schema.json", "schema-base.json", "dialect.json", "meta.json"):
        s = load(schema_dir + "/" + name)
        store[s["$id"]] = s
    doc = load(doc_path)
    errors = 0
    for top in ("schema.json", "schema-base.json"):
        schema = load(schema_dir + "/" + top)
        Draft202012Validator.check_schema(schema)
        resolver = RefResolver.from_schema(schema, store=store)
        validator = Draft202012Validator(schema, resolver=resolver)
        for e in sorted(validator.iter_errors(doc), key=lambda e: [str(p) for p in e.absolute_path]):
            errors += 1
            at = "/".join(str(p) for p in e.absolute_path)
            print("%s: #/%s: %s" % (top, at, e.message[:300]))
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())

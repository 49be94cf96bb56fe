"""The console's own checks, run by pytest so ``make test`` covers them: the TypeScript client
matches backend/openapi.yaml, the code type-checks, and the Vitest component tests pass."""

from __future__ import annotations

import re

from .conftest import ROOT, need_node, run

NPM = ["npm", "--workspace", "frontend", "run"]


def test_generated_client_matches_the_openapi_schema():
    need_node()
    done = run([*NPM, "check:api"], timeout=120)
    assert done.returncode == 0, (
        "frontend/src/api/schema.d.ts is stale; regenerate it with "
        "`npm --workspace frontend run gen:api`\n" + done.stdout[-2000:] + done.stderr[-2000:]
    )


def test_console_type_checks():
    need_node()
    done = run([*NPM, "typecheck"], timeout=300)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]


def test_vitest_component_tests():
    need_node()
    done = run([*NPM, "test", "--", "--reporter=dot"], timeout=300, env={"CI": "1"})
    out = re.sub(r"\x1b\[[0-9;]*m", "", done.stdout + done.stderr)
    assert done.returncode == 0, out[-6000:]
    m = re.search(r"Tests\s+(\d+) passed", out)
    assert m and int(m.group(1)) >= 10, out[-3000:]
    assert (ROOT / "frontend" / "src" / "components" / "LagTable.test.tsx").exists()

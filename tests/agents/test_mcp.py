"""
C{netlog mcp} end to end: the official C{mcp} SDK's own client starts
C{netlog mcp} over stdio against a real supervised C{twistd
netlog-proxy}, lists the tools, makes a session, waits for a request that
curl then makes through that session, finds it, reads it and saves the HAR.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

import pytest
from twisted.trial.unittest import SynchronousTestCase

from tests.agents.support import startSiteProxy
from tests.client.support import startOrigin
from tests.standin.support import tempDirectory
from tests.support import sourceEnv

#: The tools an agent is offered.
TOOLS = {"list_sessions", "make_session", "end_session", "find_exchanges", "read_exchange",
         "wait_for_exchange", "set_rules", "save_har"}


def structured(result: Any) -> Any:
    """
    A tool's answer, which must not be an error.
    """
    assert not result.is_error, result.content
    return result.structured_content


@pytest.mark.slow
class McpTests(SynchronousTestCase):

    def setUp(self) -> None:
        self.folder = tempDirectory(self)
        self.originPort, _ = startOrigin(self.addCleanup)
        self.api = startSiteProxy(self.folder, self.addCleanup, self.originPort)

    def test_agentOverStdio(self) -> None:
        """
        An agent's whole round over stdio: the tools listed with their
        descriptions; a session made; a wait started before curl's request
        returns that request once curl is done; find and read show it (its
        answer's body as text); the HAR saved holds it; a filter with a
        mistake is an error result the model can read.
        """
        import anyio
        from mcp import ClientSession, StdioServerParameters
        from mcp.client.stdio import stdio_client

        url = f"http://origin.test:{self.originPort}/from-curl?agent=1"
        harPath = os.path.join(self.folder, "agent.har")
        params = StdioServerParameters(
            command=sys.executable,
            args=["-m", "netlog.cli", "mcp", "--api", self.api, "--token-file",
                  os.path.join(self.folder, "api-token")],
            env=sourceEnv(),
        )
        seen: dict[str, Any] = {}
        errors = open(os.path.join(self.folder, "mcp.err"), "w")
        self.addCleanup(errors.close)

        async def agent() -> None:
            async with stdio_client(params, errlog=errors) as (read, write), ClientSession(read, write) as mcp:
                await mcp.initialize()
                tools = (await mcp.list_tools()).tools
                seen["tools"] = {t.name: t.description for t in tools}
                made = structured(await mcp.call_tool("make_session", {"name": "agent"}))
                seen["made"] = made
                waited: dict[str, Any] = {}

                async def wait() -> None:
                    waited.update(structured(await mcp.call_tool(
                        "wait_for_exchange", {"filter": "url:/from-curl", "session": "agent", "timeout": 30})))

                async with anyio.create_task_group() as group:
                    group.start_soon(wait)
                    await anyio.sleep(0.5)
                    seen["waitingBeforeCurl"] = not waited
                    curl = await anyio.run_process(["curl", "-sS", "-x", made["proxy"], url], check=False)
                    seen["curl"] = (curl.returncode, curl.stdout)
                seen["waited"] = waited
                seen["found"] = structured(await mcp.call_tool(
                    "find_exchanges", {"filter": "method:GET url:/from-curl", "session": "agent"}))
                exchangeId = waited["exchange"]["id"]
                seen["read"] = structured(await mcp.call_tool(
                    "read_exchange", {"id": exchangeId, "session": "agent", "body_chars": 8}))
                seen["saved"] = structured(await mcp.call_tool("save_har", {"path": harPath, "session": "agent"}))
                seen["sessions"] = structured(await mcp.call_tool("list_sessions", {}))
                bad = await mcp.call_tool("find_exchanges", {"filter": "stauts:200", "session": "agent"})
                seen["bad"] = (bad.is_error, " ".join(getattr(c, "text", "") for c in bad.content))
                seen["ended"] = structured(await mcp.call_tool("end_session", {"name": "agent"}))

        anyio.run(agent)

        self.assertEqual(set(seen["tools"]), TOOLS)
        self.assertIn("status:4xx", seen["tools"]["find_exchanges"])
        self.assertIn("proxy", seen["tools"]["make_session"])
        self.assertEqual(seen["made"]["name"], "agent")
        self.assertTrue(seen["made"]["proxy"].startswith("http://127.0.0.1:"))
        self.assertTrue(seen["waitingBeforeCurl"], "the wait answered before curl's request")
        self.assertEqual(seen["curl"], (0, b"you asked for /from-curl?agent=1\n"))
        self.assertTrue(seen["waited"]["found"])
        self.assertEqual(seen["waited"]["exchange"]["url"], url)
        [found] = seen["found"]["exchanges"]
        self.assertEqual((found["id"], found["status"], found["url"]), (seen["waited"]["exchange"]["id"], 200, url))
        read = seen["read"]
        self.assertEqual(read["request"]["url"], url)
        self.assertIn(["User-Agent", read["request"]["headers"][1][1]], read["request"]["headers"])
        self.assertEqual(read["response"]["status"], 200)
        self.assertEqual(read["response"]["body"]["text"], "you aske")
        self.assertEqual(read["response"]["body"]["next_offset"], 8)
        self.assertEqual(seen["saved"]["path"], harPath)
        with open(harPath, "rb") as f:
            har = json.loads(f.read())
        self.assertEqual([e["request"]["url"] for e in har["log"]["entries"]], [url])
        self.assertEqual(seen["saved"]["bytes"], os.path.getsize(harPath))
        self.assertEqual([s["name"] for s in seen["sessions"]["sessions"]], ["agent"])
        self.assertEqual(seen["bad"][0], True)
        self.assertIn("unknown field 'stauts'", seen["bad"][1])
        self.assertEqual(seen["ended"]["name"], "agent")

    def test_streamableHttp(self) -> None:
        """
        --http serves the same tools as streamable HTTP on loopback; a
        non-loopback host is refused in one line.
        """
        import anyio
        from mcp import ClientSession
        from mcp.client.streamable_http import streamable_http_client

        from tests.support import freePort

        port = freePort()
        proc = subprocess.Popen(
            [sys.executable, "-m", "netlog.cli", "mcp", "--api", self.api, "--http", f"127.0.0.1:{port}",
             "--token-file", os.path.join(self.folder, "api-token")],
            env=sourceEnv(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)

        def stop() -> None:
            proc.terminate()
            proc.wait(10)
            assert proc.stderr is not None
            proc.stderr.close()

        self.addCleanup(stop)
        names: list[str] = []

        async def agent() -> None:
            with anyio.fail_after(30):
                while True:
                    try:
                        await anyio.connect_tcp("127.0.0.1", port)
                        break
                    except OSError:
                        await anyio.sleep(0.1)
                async with streamable_http_client(f"http://127.0.0.1:{port}/mcp") as streams:
                    async with ClientSession(streams[0], streams[1]) as mcp:
                        await mcp.initialize()
                        names.extend(t.name for t in (await mcp.list_tools()).tools)
                        made = structured(await mcp.call_tool("make_session", {}))
                        names.append(made["name"])

        anyio.run(agent)
        self.assertEqual(set(names[:-1]), TOOLS)
        self.assertTrue(names[-1])
        refused = subprocess.run([sys.executable, "-m", "netlog.cli", "mcp", "--api", self.api,
                                  "--http", "0.0.0.0:8999"], env=sourceEnv(), capture_output=True, text=True,
                                 timeout=60)
        self.assertEqual(refused.returncode, 1)
        self.assertEqual(refused.stderr, "netlog mcp: 0.0.0.0 is not loopback: netlog mcp listens on "
                                         "127.0.0.1, ::1 or localhost only\n")

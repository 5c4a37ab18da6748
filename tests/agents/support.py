"""
What the agents' tests share: a supervised C{twistd netlog-proxy} (the site
proxy, which keeps bodies) in front of the loopback origin of
L{tests.client.support.startOrigin}, with its API.
"""

from __future__ import annotations

import os
from typing import Any, Callable

from tests.supervise.running import Twistd


def startSiteProxy(folder: str, addCleanup: Callable[..., Any], originPort: int) -> str:
    """
    A supervised site proxy whose one site is C{http://origin.test:PORT} on
    the origin at C{originPort}, its state (the API's token) in C{folder};
    its API's URL.
    """
    sites = os.path.join(folder, "sites.toml")
    with open(sites, "w") as f:
        f.write(f'[[site]]\nname = "origin"\norigins = ["http://origin.test:{originPort}"]\n'
                f'backend = "http://127.0.0.1:{originPort}"\n')
    args = ["--sites", sites, "--state", folder, "--listen", "tcp:0:interface=127.0.0.1",
            "--log", os.path.join(folder, "network.jsonl"), "--api", "tcp:0:interface=127.0.0.1",
            "--resolve", "origin.test=127.0.0.1", "--resolve-only"]
    twistd = Twistd(folder, "netlog-proxy", args)
    addCleanup(twistd.stop)
    twistd.waitServing(1)
    return f"http://127.0.0.1:{twistd.apiPort()}"

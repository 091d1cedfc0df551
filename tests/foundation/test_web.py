"""The topology page's files: ``/`` with the API's path prefix filled in, its two assets, nothing else."""

from __future__ import annotations

import httpx


async def test_the_page_and_its_assets_are_served(client: httpx.AsyncClient) -> None:
    page = await client.get("/")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    assert 'data-api="/v2/org/{org}/nico"' in page.text and "{{" not in page.text
    for name, kind in (("app.js", "text/javascript"), ("style.css", "text/css")):
        asset = await client.get(f"/static/{name}")
        assert asset.status_code == 200 and asset.headers["content-type"].startswith(kind)
        assert asset.headers["cache-control"] == "no-cache"
    assert "nvlink-topology" in (await client.get("/static/app.js")).text
    for missing in ("/static/index.html", "/static/..%2Fapp.py", "/static/nope.js"):
        response = await client.get(missing)
        assert response.status_code == 404, missing

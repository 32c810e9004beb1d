"""Kaval.AI 1.0's web tools under their names: ``http_client.http_request``, ``crawl4ai.crawl_url`` and
``crawl4ai.web_search``, built on kavalai's SSRF-guarded HTTP layer."""

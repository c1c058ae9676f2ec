"""kmc-agent: the pull location's side of pull mode (docs/pull.md). Reads its work feed from
the hub, writes its own cluster; never imports the server's wings, app or hub cache."""

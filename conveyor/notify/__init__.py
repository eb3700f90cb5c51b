"""Telling the rest of the system what the broker changed.

``hooks``: the interface the broker calls after a commit (wake, publish,
resolve, cancel) and the simple implementations; ``layer``: hooks for
processes that are not a node, over the channel layer; ``groups``: the
channel-layer group names every process agrees on. Below the broker: it
imports nothing of the broker, the dispatch or the API.
"""

"""Webhook workers: HTTP endpoints that process tasks through signed JSON-RPC deliveries."""

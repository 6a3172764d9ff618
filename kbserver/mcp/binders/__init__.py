"""The MCP binders of the built-in dialects, one module each: `tools(binding)` returns the dialect's
tools (a Dialect's `bind` names it). `kit` holds what every binder, a plug-in's too, builds them with."""

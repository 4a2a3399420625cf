"""Prompt text: how a prompt is framed for the model (chat, infill's fill-in-the-middle) and where generated text ends
(stopping, blocks). No torch here."""

"""Prompt text: the prompt a request is read as (prompting: ids, token healing, what its form adds), how it is framed
for the model (chat, infill's fill-in-the-middle) and where generated text ends (stopping, blocks). Torch only in
prompting, for the token masks it hands the decode loop."""

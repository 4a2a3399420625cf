"""Models: loading the bundled GGUF files, Hugging Face ids and local directories (loading), tiny random-weight models
for tests (tiny), building an Engine from a target and its draft (build), and giving back what loading freed
(memory)."""

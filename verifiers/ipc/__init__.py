"""How the judge, the arms and the caller talk: framed messages, the result channel, shared buffers."""

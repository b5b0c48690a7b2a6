"""``edgekit tune``: each runtime's fastest configuration of an artifact, searched knob by knob
with the candidates interleaved against the incumbent, written into the artifact's manifest."""

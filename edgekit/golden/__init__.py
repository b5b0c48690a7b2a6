"""Golden vectors for the app (``edgekit golden``): a bundle of real labelled images at three
stages with the artifact's expected outputs and measured tolerances (``make``), checked against
an artifact on a device (``check``), and outputs an app wrote verified, naming the
preprocessing mistake they match (``verify``)."""

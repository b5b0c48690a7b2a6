"""edgekit on a Ray cluster: nodes that advertise their devices as Ray custom resources
(``edgekit.cluster.nodes``), and ``edgekit run --cluster ADDRESS``, whose export and device
cells run as Ray tasks (``edgekit.cluster.executor``)."""

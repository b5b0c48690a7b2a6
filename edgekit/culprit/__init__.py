"""Which block of a model makes a target fail (``edgekit culprit``): the blocks a forward pass
records (``record``), one block converted the way the target converts a model (the target's
``convert_block`` role, judged by ``harness``), in a worker process with a deadline (``child``,
``worker``), classified (``outcome``), searched from the root down (``search``), and a repro
folder for the one found (``repro``); ``find.find_culprit`` is the API the CLI calls."""

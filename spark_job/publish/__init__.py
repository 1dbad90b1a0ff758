"""Publishing on the executors: how many slots (``slots``), each task's pace (``pacing``), the topic
checks made first (``topics``) and the task body that sends and counts (``publisher``)."""

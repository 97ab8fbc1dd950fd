"""What a durable client session does, below its public object (`durables.Session`): its
sequences (`core`), its delivery round (`delivery`) and its record and registry (`store`)."""

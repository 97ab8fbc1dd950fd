"""The shared and serial durables' reader (one Lua dispatcher deals to both): its state
machine (`handout`) and its loop (`reader`)."""

"""Small helpers shared by the packages of skdpvi; they import nothing from skdpvi."""

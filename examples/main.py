print("dtorch")

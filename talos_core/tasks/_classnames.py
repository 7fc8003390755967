"""Class names of the paper's vision benchmarks, in the label order of their Hugging Face data sets.

The names are the readable CLIP zero-shot class names used for these benchmarks (ImageNet: the
curated names from the CLIP paper, as shipped in open_clip's zero-shot metadata). Each list is kept
as one name per line and split on import.

>>> len(CARS), len(SUN397), len(IMAGENET), DTD[0]
(196, 397, 1000, 'banded')
"""

from __future__ import annotations


def _lines(block: str) -> tuple[str, ...]:
    """Non-empty stripped lines of ``block``.

    >>> _lines('''
    ...   a
    ...   b c
    ... ''')
    ('a', 'b c')
    """
    return tuple(line.strip() for line in block.strip().splitlines() if line.strip())


SVHN = tuple(str(d) for d in range(10))

EUROSAT = (
    "annual crop land", "forest", "brushland or shrubland", "highway or road",
    "industrial buildings or commercial buildings", "pasture land", "permanent crop land",
    "residential buildings or homes or apartments", "river", "lake or sea",
)

DTD = _lines("""
banded
blotchy
braided
bubbly
bumpy
chequered
cobwebbed
cracked
crosshatched
crystalline
dotted
fibrous
flecked
freckled
frilly
gauzy
grid
grooved
honeycombed
interlaced
knitted
lacelike
lined
marbled
matted
meshed
paisley
perforated
pitted
pleated
polka-dotted
porous
potholed
scaly
smeared
spiralled
sprinkled
stained
stratified
striped
studded
swirly
veined
waffled
woven
wrinkled
zigzagged
""")

RESISC45 = _lines("""
airplane
airport
baseball diamond
basketball court
beach
bridge
chaparral
church
circular farmland
cloud
commercial area
dense residential
desert
forest
freeway
golf course
ground track field
harbor
industrial area
intersection
island
lake
meadow
medium residential
mobile home park
mountain
overpass
palace
parking lot
railway
railway station
rectangular farmland
river
roundabout
runway
sea ice
ship
snowberg
sparse residential
stadium
storage tank
tennis court
terrace
thermal power station
wetland
""")

GTSRB = _lines("""
red and white circle 20 kph speed limit
red and white circle 30 kph speed limit
red and white circle 50 kph speed limit
red and white circle 60 kph speed limit
red and white circle 70 kph speed limit
red and white circle 80 kph speed limit
end / de-restriction of 80 kph speed limit
red and white circle 100 kph speed limit
red and white circle 120 kph speed limit
red and white circle red car and black car no passing
red and white circle red truck and black car no passing
red and white triangle road intersection warning
white and yellow diamond priority road
red and white upside down triangle yield right-of-way
stop
empty red and white circle
red and white circle no truck entry
red circle with white horizonal stripe no entry
red and white triangle with exclamation mark warning
red and white triangle with black left curve approaching warning
red and white triangle with black right curve approaching warning
red and white triangle with black double curve approaching warning
red and white triangle rough / bumpy road warning
red and white triangle car skidding / slipping warning
red and white triangle with merging / narrow lanes warning
red and white triangle with person digging / construction / road work warning
red and white triangle with traffic light approaching warning
red and white triangle with person walking warning
red and white triangle with child and person walking warning
red and white triangle with bicyle warning
red and white triangle with snowflake / ice warning
red and white triangle with deer warning
white circle with gray strike bar no speed limit
blue circle with white right turn arrow mandatory
blue circle with white left turn arrow mandatory
blue circle with white forward arrow mandatory
blue circle with white forward or right turn arrow mandatory
blue circle with white forward or left turn arrow mandatory
blue circle with white keep right arrow mandatory
blue circle with white keep left arrow mandatory
blue circle with white arrows indicating a traffic circle
white circle with gray strike bar indicating no passing for cars has ended
white circle with gray strike bar indicating no passing for trucks has ended
""")

CARS = _lines("""
AM General Hummer SUV 2000
Acura RL Sedan 2012
Acura TL Sedan 2012
Acura TL Type-S 2008
Acura TSX Sedan 2012
Acura Integra Type R 2001
Acura ZDX Hatchback 2012
Aston Martin V8 Vantage Convertible 2012
Aston Martin V8 Vantage Coupe 2012
Aston Martin Virage Convertible 2012
Aston Martin Virage Coupe 2012
Audi RS 4 Convertible 2008
Audi A5 Coupe 2012
Audi TTS Coupe 2012
Audi R8 Coupe 2012
Audi V8 Sedan 1994
Audi 100 Sedan 1994
Audi 100 Wagon 1994
Audi TT Hatchback 2011
Audi S6 Sedan 2011
Audi S5 Convertible 2012
Audi S5 Coupe 2012
Audi S4 Sedan 2012
Audi S4 Sedan 2007
Audi TT RS Coupe 2012
BMW ActiveHybrid 5 Sedan 2012
BMW 1 Series Convertible 2012
BMW 1 Series Coupe 2012
BMW 3 Series Sedan 2012
BMW 3 Series Wagon 2012
BMW 6 Series Convertible 2007
BMW X5 SUV 2007
BMW X6 SUV 2012
BMW M3 Coupe 2012
BMW M5 Sedan 2010
BMW M6 Convertible 2010
BMW X3 SUV 2012
BMW Z4 Convertible 2012
Bentley Continental Supersports Conv. Convertible 2012
Bentley Arnage Sedan 2009
Bentley Mulsanne Sedan 2011
Bentley Continental GT Coupe 2012
Bentley Continental GT Coupe 2007
Bentley Continental Flying Spur Sedan 2007
Bugatti Veyron 16.4 Convertible 2009
Bugatti Veyron 16.4 Coupe 2009
Buick Regal GS 2012
Buick Rainier SUV 2007
Buick Verano Sedan 2012
Buick Enclave SUV 2012
Cadillac CTS-V Sedan 2012
Cadillac SRX SUV 2012
Cadillac Escalade EXT Crew Cab 2007
Chevrolet Silverado 1500 Hybrid Crew Cab 2012
Chevrolet Corvette Convertible 2012
Chevrolet Corvette ZR1 2012
Chevrolet Corvette Ron Fellows Edition Z06 2007
Chevrolet Traverse SUV 2012
Chevrolet Camaro Convertible 2012
Chevrolet HHR SS 2010
Chevrolet Impala Sedan 2007
Chevrolet Tahoe Hybrid SUV 2012
Chevrolet Sonic Sedan 2012
Chevrolet Express Cargo Van 2007
Chevrolet Avalanche Crew Cab 2012
Chevrolet Cobalt SS 2010
Chevrolet Malibu Hybrid Sedan 2010
Chevrolet TrailBlazer SS 2009
Chevrolet Silverado 2500HD Regular Cab 2012
Chevrolet Silverado 1500 Classic Extended Cab 2007
Chevrolet Express Van 2007
Chevrolet Monte Carlo Coupe 2007
Chevrolet Malibu Sedan 2007
Chevrolet Silverado 1500 Extended Cab 2012
Chevrolet Silverado 1500 Regular Cab 2012
Chrysler Aspen SUV 2009
Chrysler Sebring Convertible 2010
Chrysler Town and Country Minivan 2012
Chrysler 300 SRT-8 2010
Chrysler Crossfire Convertible 2008
Chrysler PT Cruiser Convertible 2008
Daewoo Nubira Wagon 2002
Dodge Caliber Wagon 2012
Dodge Caliber Wagon 2007
Dodge Caravan Minivan 1997
Dodge Ram Pickup 3500 Crew Cab 2010
Dodge Ram Pickup 3500 Quad Cab 2009
Dodge Sprinter Cargo Van 2009
Dodge Journey SUV 2012
Dodge Dakota Crew Cab 2010
Dodge Dakota Club Cab 2007
Dodge Magnum Wagon 2008
Dodge Challenger SRT8 2011
Dodge Durango SUV 2012
Dodge Durango SUV 2007
Dodge Charger Sedan 2012
Dodge Charger SRT-8 2009
Eagle Talon Hatchback 1998
FIAT 500 Abarth 2012
FIAT 500 Convertible 2012
Ferrari FF Coupe 2012
Ferrari California Convertible 2012
Ferrari 458 Italia Convertible 2012
Ferrari 458 Italia Coupe 2012
Fisker Karma Sedan 2012
Ford F-450 Super Duty Crew Cab 2012
Ford Mustang Convertible 2007
Ford Freestar Minivan 2007
Ford Expedition EL SUV 2009
Ford Edge SUV 2012
Ford Ranger SuperCab 2011
Ford GT Coupe 2006
Ford F-150 Regular Cab 2012
Ford F-150 Regular Cab 2007
Ford Focus Sedan 2007
Ford E-Series Wagon Van 2012
Ford Fiesta Sedan 2012
GMC Terrain SUV 2012
GMC Savana Van 2012
GMC Yukon Hybrid SUV 2012
GMC Acadia SUV 2012
GMC Canyon Extended Cab 2012
Geo Metro Convertible 1993
HUMMER H3T Crew Cab 2010
HUMMER H2 SUT Crew Cab 2009
Honda Odyssey Minivan 2012
Honda Odyssey Minivan 2007
Honda Accord Coupe 2012
Honda Accord Sedan 2012
Hyundai Veloster Hatchback 2012
Hyundai Santa Fe SUV 2012
Hyundai Tucson SUV 2012
Hyundai Veracruz SUV 2012
Hyundai Sonata Hybrid Sedan 2012
Hyundai Elantra Sedan 2007
Hyundai Accent Sedan 2012
Hyundai Genesis Sedan 2012
Hyundai Sonata Sedan 2012
Hyundai Elantra Touring Hatchback 2012
Hyundai Azera Sedan 2012
Infiniti G Coupe IPL 2012
Infiniti QX56 SUV 2011
Isuzu Ascender SUV 2008
Jaguar XK XKR 2012
Jeep Patriot SUV 2012
Jeep Wrangler SUV 2012
Jeep Liberty SUV 2012
Jeep Grand Cherokee SUV 2012
Jeep Compass SUV 2012
Lamborghini Reventon Coupe 2008
Lamborghini Aventador Coupe 2012
Lamborghini Gallardo LP 570-4 Superleggera 2012
Lamborghini Diablo Coupe 2001
Land Rover Range Rover SUV 2012
Land Rover LR2 SUV 2012
Lincoln Town Car Sedan 2011
MINI Cooper Roadster Convertible 2012
Maybach Landaulet Convertible 2012
Mazda Tribute SUV 2011
McLaren MP4-12C Coupe 2012
Mercedes-Benz 300-Class Convertible 1993
Mercedes-Benz C-Class Sedan 2012
Mercedes-Benz SL-Class Coupe 2009
Mercedes-Benz E-Class Sedan 2012
Mercedes-Benz S-Class Sedan 2012
Mercedes-Benz Sprinter Van 2012
Mitsubishi Lancer Sedan 2012
Nissan Leaf Hatchback 2012
Nissan NV Passenger Van 2012
Nissan Juke Hatchback 2012
Nissan 240SX Coupe 1998
Plymouth Neon Coupe 1999
Porsche Panamera Sedan 2012
Ram C/V Cargo Van Minivan 2012
Rolls-Royce Phantom Drophead Coupe Convertible 2012
Rolls-Royce Ghost Sedan 2012
Rolls-Royce Phantom Sedan 2012
Scion xD Hatchback 2012
Spyker C8 Convertible 2009
Spyker C8 Coupe 2009
Suzuki Aerio Sedan 2007
Suzuki Kizashi Sedan 2012
Suzuki SX4 Hatchback 2012
Suzuki SX4 Sedan 2012
Tesla Model S Sedan 2012
Toyota Sequoia SUV 2012
Toyota Camry Sedan 2012
Toyota Corolla Sedan 2012
Toyota 4Runner SUV 2012
Volkswagen Golf Hatchback 2012
Volkswagen Golf Hatchback 1991
Volkswagen Beetle Hatchback 2012
Volvo C30 Hatchback 2012
Volvo 240 Sedan 1993
Volvo XC90 SUV 2007
smart fortwo Convertible 2012
""")

SUN397 = _lines("""
abbey
airplane cabin
airport terminal
alley
amphitheater
amusement arcade
amusement park
anechoic chamber
apartment building outdoor
apse indoor
aquarium
aqueduct
arch
archive
arrival gate outdoor
art gallery
art school
art studio
assembly line
athletic field outdoor
atrium public
attic
auditorium
auto factory
badlands
badminton court indoor
baggage claim
bakery shop
balcony exterior
balcony interior
ball pit
ballroom
bamboo forest
banquet hall
bar
barn
barndoor
baseball field
basement
basilica
basketball court outdoor
bathroom
batters box
bayou
bazaar indoor
bazaar outdoor
beach
beauty salon
bedroom
berth
biology laboratory
bistro indoor
boardwalk
boat deck
boathouse
bookstore
booth indoor
botanical garden
bow window indoor
bow window outdoor
bowling alley
boxing ring
brewery indoor
bridge
building facade
bullring
burial chamber
bus interior
butchers shop
butte
cabin outdoor
cafeteria
campsite
campus
canal natural
canal urban
candy store
canyon
car interior backseat
car interior frontseat
carrousel
casino indoor
castle
catacomb
cathedral indoor
cathedral outdoor
cavern indoor
cemetery
chalet
cheese factory
chemistry lab
chicken coop indoor
chicken coop outdoor
childs room
church indoor
church outdoor
classroom
clean room
cliff
cloister indoor
closet
clothing store
coast
cockpit
coffee shop
computer room
conference center
conference room
construction site
control room
control tower outdoor
corn field
corral
corridor
cottage garden
courthouse
courtroom
courtyard
covered bridge exterior
creek
crevasse
crosswalk
cubicle office
dam
delicatessen
dentists office
desert sand
desert vegetation
diner indoor
diner outdoor
dinette home
dinette vehicle
dining car
dining room
discotheque
dock
doorway outdoor
dorm room
driveway
driving range outdoor
drugstore
electrical substation
elevator door
elevator interior
elevator shaft
engine room
escalator indoor
excavation
factory indoor
fairway
fastfood restaurant
field cultivated
field wild
fire escape
fire station
firing range indoor
fishpond
florist shop indoor
food court
forest broadleaf
forest needleleaf
forest path
forest road
formal garden
fountain
galley
game room
garage indoor
garbage dump
gas station
gazebo exterior
general store indoor
general store outdoor
gift shop
golf course
greenhouse indoor
greenhouse outdoor
gymnasium indoor
hangar indoor
hangar outdoor
harbor
hayfield
heliport
herb garden
highway
hill
home office
hospital
hospital room
hot spring
hot tub outdoor
hotel outdoor
hotel room
house
hunting lodge outdoor
ice cream parlor
ice floe
ice shelf
ice skating rink indoor
ice skating rink outdoor
iceberg
igloo
industrial area
inn outdoor
islet
jacuzzi indoor
jail cell
jail indoor
jewelry shop
kasbah
kennel indoor
kennel outdoor
kindergarden classroom
kitchen
kitchenette
labyrinth outdoor
lake natural
landfill
landing deck
laundromat
lecture room
library indoor
library outdoor
lido deck outdoor
lift bridge
lighthouse
limousine interior
living room
lobby
lock chamber
locker room
mansion
manufactured home
market indoor
market outdoor
marsh
martial arts gym
mausoleum
medina
moat water
monastery outdoor
mosque indoor
mosque outdoor
motel
mountain
mountain snowy
movie theater indoor
museum indoor
music store
music studio
nuclear power plant outdoor
nursery
oast house
observatory outdoor
ocean
office
office building
oil refinery outdoor
oilrig
operating room
orchard
outhouse outdoor
pagoda
palace
pantry
park
parking garage indoor
parking garage outdoor
parking lot
parlor
pasture
patio
pavilion
pharmacy
phone booth
physics laboratory
picnic area
pilothouse indoor
planetarium outdoor
playground
playroom
plaza
podium indoor
podium outdoor
pond
poolroom establishment
poolroom home
power plant outdoor
promenade deck
pub indoor
pulpit
putting green
racecourse
raceway
raft
railroad track
rainforest
reception
recreation room
residential neighborhood
restaurant
restaurant kitchen
restaurant patio
rice paddy
riding arena
river
rock arch
rope bridge
ruin
runway
sandbar
sandbox
sauna
schoolhouse
sea cliff
server room
shed
shoe shop
shopfront
shopping mall indoor
shower
skatepark
ski lodge
ski resort
ski slope
sky
skyscraper
slum
snowfield
squash court
stable
stadium baseball
stadium football
stage indoor
staircase
street
subway interior
subway station platform
supermarket
sushi bar
swamp
swimming pool indoor
swimming pool outdoor
synagogue indoor
synagogue outdoor
television studio
temple east asia
temple south asia
tennis court indoor
tennis court outdoor
tent outdoor
theater indoor procenium
theater indoor seats
thriftshop
throne room
ticket booth
toll plaza
topiary garden
tower
toyshop
track outdoor
train railway
train station platform
tree farm
tree house
trench
underwater coral reef
utility room
valley
van interior
vegetable garden
veranda
veterinarians office
viaduct
videostore
village
vineyard
volcano
volleyball court indoor
volleyball court outdoor
waiting room
warehouse indoor
water tower
waterfall block
waterfall fan
waterfall plunge
watering hole
wave
wet bar
wheat field
wind farm
windmill
wine cellar barrel storage
wine cellar bottle storage
wrestling ring indoor
yard
youth hostel
""")

IMAGENET = _lines("""
tench
goldfish
great white shark
tiger shark
hammerhead shark
electric ray
stingray
rooster
hen
ostrich
brambling
goldfinch
house finch
junco
indigo bunting
American robin
bulbul
jay
magpie
chickadee
American dipper
kite (bird of prey)
bald eagle
vulture
great grey owl
fire salamander
smooth newt
newt
spotted salamander
axolotl
American bullfrog
tree frog
tailed frog
loggerhead sea turtle
leatherback sea turtle
mud turtle
terrapin
box turtle
banded gecko
green iguana
Carolina anole
desert grassland whiptail lizard
agama
frilled-necked lizard
alligator lizard
Gila monster
European green lizard
chameleon
Komodo dragon
Nile crocodile
American alligator
triceratops
worm snake
ring-necked snake
eastern hog-nosed snake
smooth green snake
kingsnake
garter snake
water snake
vine snake
night snake
boa constrictor
African rock python
Indian cobra
green mamba
sea snake
Saharan horned viper
eastern diamondback rattlesnake
sidewinder rattlesnake
trilobite
harvestman
scorpion
yellow garden spider
barn spider
European garden spider
southern black widow
tarantula
wolf spider
tick
centipede
black grouse
ptarmigan
ruffed grouse
prairie grouse
peafowl
quail
partridge
african grey parrot
macaw
sulphur-crested cockatoo
lorikeet
coucal
bee eater
hornbill
hummingbird
jacamar
toucan
duck
red-breasted merganser
goose
black swan
tusker
echidna
platypus
wallaby
koala
wombat
jellyfish
sea anemone
brain coral
flatworm
nematode
conch
snail
slug
sea slug
chiton
chambered nautilus
Dungeness crab
rock crab
fiddler crab
red king crab
American lobster
spiny lobster
crayfish
hermit crab
isopod
white stork
black stork
spoonbill
flamingo
little blue heron
great egret
bittern bird
crane bird
limpkin
common gallinule
American coot
bustard
ruddy turnstone
dunlin
common redshank
dowitcher
oystercatcher
pelican
king penguin
albatross
grey whale
killer whale
dugong
sea lion
Chihuahua
Japanese Chin
Maltese
Pekingese
Shih Tzu
King Charles Spaniel
Papillon
toy terrier
Rhodesian Ridgeback
Afghan Hound
Basset Hound
Beagle
Bloodhound
Bluetick Coonhound
Black and Tan Coonhound
Treeing Walker Coonhound
English foxhound
Redbone Coonhound
borzoi
Irish Wolfhound
Italian Greyhound
Whippet
Ibizan Hound
Norwegian Elkhound
Otterhound
Saluki
Scottish Deerhound
Weimaraner
Staffordshire Bull Terrier
American Staffordshire Terrier
Bedlington Terrier
Border Terrier
Kerry Blue Terrier
Irish Terrier
Norfolk Terrier
Norwich Terrier
Yorkshire Terrier
Wire Fox Terrier
Lakeland Terrier
Sealyham Terrier
Airedale Terrier
Cairn Terrier
Australian Terrier
Dandie Dinmont Terrier
Boston Terrier
Miniature Schnauzer
Giant Schnauzer
Standard Schnauzer
Scottish Terrier
Tibetan Terrier
Australian Silky Terrier
Soft-coated Wheaten Terrier
West Highland White Terrier
Lhasa Apso
Flat-Coated Retriever
Curly-coated Retriever
Golden Retriever
Labrador Retriever
Chesapeake Bay Retriever
German Shorthaired Pointer
Vizsla
English Setter
Irish Setter
Gordon Setter
Brittany dog
Clumber Spaniel
English Springer Spaniel
Welsh Springer Spaniel
Cocker Spaniel
Sussex Spaniel
Irish Water Spaniel
Kuvasz
Schipperke
Groenendael dog
Malinois
Briard
Australian Kelpie
Komondor
Old English Sheepdog
Shetland Sheepdog
collie
Border Collie
Bouvier des Flandres dog
Rottweiler
German Shepherd Dog
Dobermann
Miniature Pinscher
Greater Swiss Mountain Dog
Bernese Mountain Dog
Appenzeller Sennenhund
Entlebucher Sennenhund
Boxer
Bullmastiff
Tibetan Mastiff
French Bulldog
Great Dane
St. Bernard
husky
Alaskan Malamute
Siberian Husky
Dalmatian
Affenpinscher
Basenji
pug
Leonberger
Newfoundland dog
Great Pyrenees dog
Samoyed
Pomeranian
Chow Chow
Keeshond
brussels griffon
Pembroke Welsh Corgi
Cardigan Welsh Corgi
Toy Poodle
Miniature Poodle
Standard Poodle
Mexican hairless dog (xoloitzcuintli)
grey wolf
Alaskan tundra wolf
red wolf or maned wolf
coyote
dingo
dhole
African wild dog
hyena
red fox
kit fox
Arctic fox
grey fox
tabby cat
tiger cat
Persian cat
Siamese cat
Egyptian Mau
cougar
lynx
leopard
snow leopard
jaguar
lion
tiger
cheetah
brown bear
American black bear
polar bear
sloth bear
mongoose
meerkat
tiger beetle
ladybug
ground beetle
longhorn beetle
leaf beetle
dung beetle
rhinoceros beetle
weevil
fly
bee
ant
grasshopper
cricket insect
stick insect
cockroach
praying mantis
cicada
leafhopper
lacewing
dragonfly
damselfly
red admiral butterfly
ringlet butterfly
monarch butterfly
small white butterfly
sulphur butterfly
gossamer-winged butterfly
starfish
sea urchin
sea cucumber
cottontail rabbit
hare
Angora rabbit
hamster
porcupine
fox squirrel
marmot
beaver
guinea pig
common sorrel horse
zebra
pig
wild boar
warthog
hippopotamus
ox
water buffalo
bison
ram (adult male sheep)
bighorn sheep
Alpine ibex
hartebeest
impala (antelope)
gazelle
arabian camel
llama
weasel
mink
European polecat
black-footed ferret
otter
skunk
badger
armadillo
three-toed sloth
orangutan
gorilla
chimpanzee
gibbon
siamang
guenon
patas monkey
baboon
macaque
langur
black-and-white colobus
proboscis monkey
marmoset
white-headed capuchin
howler monkey
titi monkey
Geoffroy's spider monkey
common squirrel monkey
ring-tailed lemur
indri
Asian elephant
African bush elephant
red panda
giant panda
snoek fish
eel
silver salmon
rock beauty fish
clownfish
sturgeon
gar fish
lionfish
pufferfish
abacus
abaya
academic gown
accordion
acoustic guitar
aircraft carrier
airliner
airship
altar
ambulance
amphibious vehicle
analog clock
apiary
apron
trash can
assault rifle
backpack
bakery
balance beam
balloon
ballpoint pen
Band-Aid
banjo
baluster / handrail
barbell
barber chair
barbershop
barn
barometer
barrel
wheelbarrow
baseball
basketball
bassinet
bassoon
swimming cap
bath towel
bathtub
station wagon
lighthouse
beaker
military hat (bearskin or shako)
beer bottle
beer glass
bell tower
baby bib
tandem bicycle
bikini
ring binder
binoculars
birdhouse
boathouse
bobsleigh
bolo tie
poke bonnet
bookcase
bookstore
bottle cap
hunting bow
bow tie
brass memorial plaque
bra
breakwater
breastplate
broom
bucket
buckle
bulletproof vest
high-speed train
butcher shop
taxicab
cauldron
candle
cannon
canoe
can opener
cardigan
car mirror
carousel
tool kit
cardboard box / carton
car wheel
automated teller machine
cassette
cassette player
castle
catamaran
CD player
cello
mobile phone
chain
chain-link fence
chain mail
chainsaw
storage chest
chiffonier
bell or wind chime
china cabinet
Christmas stocking
church
movie theater
cleaver
cliff dwelling
cloak
clogs
cocktail shaker
coffee mug
coffeemaker
spiral or coil
combination lock
computer keyboard
candy store
container ship
convertible
corkscrew
cornet
cowboy boot
cowboy hat
cradle
construction crane
crash helmet
crate
infant bed
Crock Pot
croquet ball
crutch
cuirass
dam
desk
desktop computer
rotary dial telephone
diaper
digital clock
digital watch
dining table
dishcloth
dishwasher
disc brake
dock
dog sled
dome
doormat
drilling rig
drum
drumstick
dumbbell
Dutch oven
electric fan
electric guitar
electric locomotive
entertainment center
envelope
espresso machine
face powder
feather boa
filing cabinet
fireboat
fire truck
fire screen
flagpole
flute
folding chair
football helmet
forklift
fountain
fountain pen
four-poster bed
freight car
French horn
frying pan
fur coat
garbage truck
gas mask or respirator
gas pump
goblet
go-kart
golf ball
golf cart
gondola
gong
gown
grand piano
greenhouse
radiator grille
grocery store
guillotine
hair clip
hair spray
half-track
hammer
hamper
hair dryer
hand-held computer
handkerchief
hard disk drive
harmonica
harp
combine harvester
hatchet
holster
home theater
honeycomb
hook
hoop skirt
gymnastic horizontal bar
horse-drawn vehicle
hourglass
iPod
clothes iron
carved pumpkin
jeans
jeep
T-shirt
jigsaw puzzle
rickshaw
joystick
kimono
knee pad
knot
lab coat
ladle
lampshade
laptop computer
lawn mower
lens cap
letter opener
library
lifeboat
lighter
limousine
ocean liner
lipstick
slip-on shoe
lotion
music speaker
loupe magnifying glass
sawmill
magnetic compass
messenger bag
mailbox
tights
one-piece bathing suit
manhole cover
maraca
marimba
mask
matchstick
maypole
maze
measuring cup
medicine cabinet
megalith
microphone
microwave oven
military uniform
milk can
minibus
miniskirt
minivan
missile
mitten
mixing bowl
mobile home
ford model t
modem
monastery
monitor
moped
mortar and pestle
graduation cap
mosque
mosquito net
vespa
mountain bike
tent
computer mouse
mousetrap
moving van
muzzle
metal nail
neck brace
necklace
baby pacifier
notebook computer
obelisk
oboe
ocarina
odometer
oil filter
pipe organ
oscilloscope
overskirt
bullock cart
oxygen mask
product packet / packaging
paddle
paddle wheel
padlock
paintbrush
pajamas
palace
pan flute
paper towel
parachute
parallel bars
park bench
parking meter
railroad car
patio
payphone
pedestal
pencil case
pencil sharpener
perfume
Petri dish
photocopier
plectrum
Pickelhaube
picket fence
pickup truck
pier
piggy bank
pill bottle
pillow
ping-pong ball
pinwheel
pirate ship
drink pitcher
block plane
planetarium
plastic bag
plate rack
farm plow
plunger
Polaroid camera
pole
police van
poncho
pool table
soda bottle
plant pot
potter's wheel
power drill
prayer rug
printer
prison
missile
projector
hockey puck
punching bag
purse
quill
quilt
race car
racket
radiator
radio
radio telescope
rain barrel
recreational vehicle
fishing casting reel
reflex camera
refrigerator
remote control
restaurant
revolver
rifle
rocking chair
rotisserie
eraser
rugby ball
ruler measuring stick
sneaker
safe
safety pin
salt shaker
sandal
sarong
saxophone
scabbard
weighing scale
school bus
schooner
scoreboard
CRT monitor
screw
screwdriver
seat belt
sewing machine
shield
shoe store
shoji screen / room divider
shopping basket
shopping cart
shovel
shower cap
shower curtain
ski
balaclava ski mask
sleeping bag
slide rule
sliding door
slot machine
snorkel
snowmobile
snowplow
soap dispenser
soccer ball
sock
solar thermal collector
sombrero
soup bowl
keyboard space bar
space heater
space shuttle
spatula
motorboat
spider web
spindle
sports car
spotlight
stage
steam locomotive
through arch bridge
steel drum
stethoscope
scarf
stone wall
stopwatch
stove
strainer
tram
stretcher
couch
stupa
submarine
suit
sundial
sunglasses
sunglasses
sunscreen
suspension bridge
mop
sweatshirt
swim trunks / shorts
swing
electrical switch
syringe
table lamp
tank
tape player
teapot
teddy bear
television
tennis ball
thatched roof
front curtain
thimble
threshing machine
throne
tile roof
toaster
tobacco shop
toilet seat
torch
totem pole
tow truck
toy store
tractor
semi-trailer truck
tray
trench coat
tricycle
trimaran
tripod
triumphal arch
trolleybus
trombone
hot tub
turnstile
typewriter keyboard
umbrella
unicycle
upright piano
vacuum cleaner
vase
vaulted or arched ceiling
velvet fabric
vending machine
vestment
viaduct
violin
volleyball
waffle iron
wall clock
wallet
wardrobe
military aircraft
sink
washing machine
water bottle
water jug
water tower
whiskey jug
whistle
hair wig
window screen
window shade
Windsor tie
wine bottle
airplane wing
wok
wooden spoon
wool
split-rail fence
shipwreck
sailboat
yurt
website
comic book
crossword
traffic or street sign
traffic light
dust jacket
menu
plate
guacamole
consomme
hot pot
trifle
ice cream
popsicle
baguette
bagel
pretzel
cheeseburger
hot dog
mashed potatoes
cabbage
broccoli
cauliflower
zucchini
spaghetti squash
acorn squash
butternut squash
cucumber
artichoke
bell pepper
cardoon
mushroom
Granny Smith apple
strawberry
orange
lemon
fig
pineapple
banana
jackfruit
cherimoya (custard apple)
pomegranate
hay
carbonara
chocolate syrup
dough
meatloaf
pizza
pot pie
burrito
red wine
espresso
tea cup
eggnog
mountain
bubble
cliff
coral reef
geyser
lakeshore
promontory
sandbar
beach
valley
volcano
baseball player
bridegroom
scuba diver
rapeseed
daisy
yellow lady's slipper
corn
acorn
rose hip
horse chestnut seed
coral fungus
agaric
gyromitra
stinkhorn mushroom
earth star fungus
hen of the woods mushroom
bolete
corn cob
toilet paper
""")

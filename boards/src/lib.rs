//! iwnic boards: ECP5 dev boards with two RGMII Gigabit ports and open tools end to end
//! (Colorlight i5 and 5A-75B, LFE5U-25F): top-levels, pin constraints, the yosys →
//! nextpnr-ecp5 → ecppack bitstream flow and the openFPGALoader flash command.
//!
//! Status: board definitions follow the HDL datapath (boards milestone).
